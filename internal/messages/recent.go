package messages

import (
	"context"
	"fmt"
	"time"
)

// Recent returns chat's newest n messages from people (not the bot's
// own), newest first, for the console.
func (s *Store) Recent(ctx context.Context, chat string, n int) ([]Stored, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, id, sender, sender_name, time, text, media FROM messages
		WHERE chat_jid = ? AND is_bot = 0 AND react_to = '' ORDER BY seq DESC LIMIT ?`, chat, n)
	if err != nil {
		return nil, fmt.Errorf("recent messages of %s: %w", chat, err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var m Stored
		var ms int64
		if err := rows.Scan(&m.Seq, &m.ID, &m.SenderJID, &m.SenderName, &ms, &m.Text, &m.Media); err != nil {
			return nil, fmt.Errorf("recent messages of %s: %w", chat, err)
		}
		m.Time = time.UnixMilli(ms)
		out = append(out, m)
	}
	return out, rows.Err()
}
