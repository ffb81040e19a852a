package telegram

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Chat is one chat the bot has seen, as 'nanoclawd telegram chats' lists it.
type Chat struct {
	JID      string    `json:"jid"`
	Title    string    `json:"title"`
	Type     string    `json:"type"` // private, group, supergroup or channel
	Username string    `json:"username,omitempty"`
	LastSeen time.Time `json:"lastSeen"`
}

// recordChat keeps chat in telegram_chats (the channel's own table).
func (c *Channel) recordChat(ctx context.Context, chat models.Chat, at time.Time) error {
	if c.opts.DB == nil {
		return nil
	}
	_, err := c.opts.DB.ExecContext(ctx, `INSERT INTO telegram_chats (id, title, type, username, last_seen) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET title = excluded.title, type = excluded.type, username = excluded.username,
			last_seen = max(telegram_chats.last_seen, excluded.last_seen)`,
		chat.ID, chatTitle(chat), string(chat.Type), chat.Username, at.UnixMilli())
	if err != nil {
		return fmt.Errorf("telegram: store chat %d: %w", chat.ID, err)
	}
	return nil
}

// ListChats returns the chats the bot has seen, the most recent first.
func ListChats(ctx context.Context, db *store.DB) ([]Chat, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, title, type, username, last_seen FROM telegram_chats ORDER BY last_seen DESC, id`)
	if err != nil {
		return nil, fmt.Errorf("telegram: list chats: %w", err)
	}
	defer rows.Close()
	out := []Chat{}
	for rows.Next() {
		var id, ms int64
		var ch Chat
		if err := rows.Scan(&id, &ch.Title, &ch.Type, &ch.Username, &ms); err != nil {
			return nil, err
		}
		ch.JID, ch.LastSeen = JID(id), time.UnixMilli(ms)
		out = append(out, ch)
	}
	return out, rows.Err()
}

// stateOwner is the telegram_state row holding the owner's user id.
const stateOwner = "owner"

// SetOwner records userID as the owner: the default approver of alerts
// (alerts.approvers unset). Setup calls it with whoever sent the code.
func SetOwner(ctx context.Context, db *store.DB, userID int64) error {
	_, err := db.ExecContext(ctx, `INSERT INTO telegram_state (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, stateOwner, strconv.FormatInt(userID, 10))
	if err != nil {
		return fmt.Errorf("telegram: record the owner: %w", err)
	}
	return nil
}

// Owner is the owner's user id, 0 when setup named none.
func Owner(ctx context.Context, db *store.DB) (int64, error) {
	var v string
	err := db.QueryRowContext(ctx, `SELECT value FROM telegram_state WHERE name = ?`, stateOwner).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("telegram: read the owner: %w", err)
	}
	return strconv.ParseInt(v, 10, 64)
}

// isOwner tells whether user speaks for the owner: the one who sent the
// setup code, or the other end of a private chat (a private chat is main
// only when its user made it so). A message marked so counts as the
// owner's own (channel.Message.FromMe), the default approver.
func (c *Channel) isOwner(ctx context.Context, user int64, chat models.Chat) bool {
	if chat.Type == models.ChatTypePrivate && chat.ID == user {
		return true
	}
	if c.opts.DB == nil {
		return false
	}
	owner, err := Owner(ctx, c.opts.DB)
	return err == nil && owner != 0 && owner == user
}
