package outbox

import (
	"context"
	"fmt"
	"time"
)

// Backlog is the unsent messages of one chat ("" for alerts that wait for
// a main group).
type Backlog struct {
	ChatJID   string
	Count     int
	Oldest    time.Time
	Attempts  int       // the most attempts of any of them
	LastError string    // the newest failure recorded
	RetryAt   time.Time // zero when no backoff holds the chat
}

// Backlog lists the chats with unsent messages (not those given up on),
// the chat with the oldest waiting message first.
func (o *Outbox) Backlog(ctx context.Context) ([]Backlog, error) {
	rows, err := o.db.QueryContext(ctx, `
		SELECT COALESCE(chat_jid, ''), COUNT(*), MIN(created_at), MAX(attempts),
		       COALESCE((SELECT last_error FROM outbox o2 WHERE o2.sent_at IS NULL AND o2.failed_at IS NULL AND o2.last_error IS NOT NULL
		                 AND COALESCE(o2.chat_jid, '') = COALESCE(outbox.chat_jid, '') ORDER BY id DESC LIMIT 1), '')
		FROM outbox WHERE sent_at IS NULL AND failed_at IS NULL GROUP BY chat_jid ORDER BY MIN(created_at)`)
	if err != nil {
		return nil, fmt.Errorf("outbox: backlog: %w", err)
	}
	defer rows.Close()
	out := []Backlog{}
	for rows.Next() {
		var (
			b      Backlog
			oldest int64
		)
		if err := rows.Scan(&b.ChatJID, &b.Count, &oldest, &b.Attempts, &b.LastError); err != nil {
			return nil, fmt.Errorf("outbox: backlog: %w", err)
		}
		b.Oldest = time.Unix(0, oldest)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: backlog: %w", err)
	}
	o.mu.Lock()
	now := time.Now()
	for i, b := range out {
		if st := o.chats[b.ChatJID]; st != nil && now.Before(st.retryAt) {
			out[i].RetryAt = st.retryAt
		}
	}
	o.mu.Unlock()
	return out, nil
}
