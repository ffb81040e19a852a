package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Recent is one message queued for a chat, as the console lists it.
type Recent struct {
	Text    string
	Kind    string
	Created time.Time
	Sent    time.Time // zero while it waits
	Failed  bool      // given up on
}

// RecentTo returns the newest n messages queued for chat, newest first.
func (o *Outbox) RecentTo(ctx context.Context, chat string, n int) ([]Recent, error) {
	rows, err := o.db.QueryContext(ctx, `SELECT text, kind, created_at, sent_at, failed_at IS NOT NULL FROM outbox
		WHERE chat_jid = ? ORDER BY id DESC LIMIT ?`, chat, n)
	if err != nil {
		return nil, fmt.Errorf("outbox: recent messages of %s: %w", chat, err)
	}
	defer rows.Close()
	var out []Recent
	for rows.Next() {
		var r Recent
		var created int64
		var sent sql.NullInt64
		if err := rows.Scan(&r.Text, &r.Kind, &created, &sent, &r.Failed); err != nil {
			return nil, fmt.Errorf("outbox: recent messages of %s: %w", chat, err)
		}
		r.Created = time.Unix(0, created)
		if sent.Valid {
			r.Sent = time.Unix(0, sent.Int64)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
