package router

import (
	"context"
	"database/sql"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// ListChats returns every chat a channel has reported (OnChat), registered
// or not: the cache of chat names, which WhatsApp refreshes on connect and
// daily.
func ListChats(ctx context.Context, db *sql.DB) ([]channel.Chat, error) {
	rows, err := db.QueryContext(ctx, `SELECT jid, name, is_group, last_activity FROM chats ORDER BY name, jid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []channel.Chat
	for rows.Next() {
		var ch channel.Chat
		var ms int64
		if err := rows.Scan(&ch.JID, &ch.Name, &ch.IsGroup, &ms); err != nil {
			return nil, err
		}
		ch.Time = time.UnixMilli(ms)
		out = append(out, ch)
	}
	return out, rows.Err()
}
