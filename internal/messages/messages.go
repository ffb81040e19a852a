// Package messages owns what the chats said and how far the assistant has
// answered: the chats, messages, cursors and sessions tables. The router
// decides; this package stores.
package messages

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Store reads and writes chats, messages, cursors and sessions in db
// (migrated by store.Open).
type Store struct {
	db      *store.DB
	pending chan struct{} // capacity 1: a message waits to be indexed (index.go)
}

// New returns the store over db.
func New(db *store.DB) *Store { return &Store{db: db, pending: make(chan struct{}, 1)} }

// Stored is one stored message of a chat.
type Stored struct {
	Seq        int64  // arrival order, the cursor's unit
	ID         string // the channel's id of the message, unique in its chat
	SenderJID  string // the sender's JID (or local id), for the senders allowlist
	SenderName string // the name to show (the JID when the channel gave none)
	Time       time.Time
	Text       string // the caption of a file; a reaction's emoji
	// Media is the marker of a file sent with it, as the prompt shows it
	// ("[document report.pdf, 1.2 MB, media/ID.pdf]"); "" for none.
	Media string
	// What the message replies to, if it is a reply.
	QuotedID, QuotedSender, QuotedText string
	// ReactTo is the id of the message this reaction is about; "" for a message.
	ReactTo string
}

// RecordChat stores chat metadata for any chat, registered or not: a name
// given replaces the old one, the last activity only moves forward, and a
// chat once known to be a group stays one (a message records its chat
// with neither name nor kind).
func (s *Store) RecordChat(ctx context.Context, c channel.Chat) error {
	ms := c.Time.UnixMilli()
	if c.Time.IsZero() {
		ms = 0
	}
	// Do: it comes before a message is stored, and a full disk must not
	// refuse that message.
	err := s.db.Do(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO chats (jid, name, is_group, last_activity) VALUES (?, ?, ?, ?)
		ON CONFLICT (jid) DO UPDATE SET
			name = CASE WHEN excluded.name != '' THEN excluded.name ELSE chats.name END,
			is_group = max(chats.is_group, excluded.is_group),
			last_activity = max(chats.last_activity, excluded.last_activity)`,
			c.JID, c.Name, c.IsGroup, ms)
		return err
	})
	if err != nil {
		return fmt.Errorf("messages: store chat %s: %w", c.JID, err)
	}
	return nil
}

// ListChats returns every chat a channel has reported (RecordChat),
// registered or not: the cache of chat names, which WhatsApp refreshes on
// connect and daily.
func (s *Store) ListChats(ctx context.Context) ([]channel.Chat, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT jid, name, is_group, last_activity FROM chats ORDER BY name, jid`)
	if err != nil {
		return nil, fmt.Errorf("messages: list chats: %w", err)
	}
	defer rows.Close()
	var out []channel.Chat
	for rows.Next() {
		var ch channel.Chat
		var ms int64
		if err := rows.Scan(&ch.JID, &ch.Name, &ch.IsGroup, &ms); err != nil {
			return nil, fmt.Errorf("messages: list chats: %w", err)
		}
		ch.Time = time.UnixMilli(ms)
		out = append(out, ch)
	}
	return out, rows.Err()
}

// RecentGroupChats returns the chats of registered groups, most recently
// active first, at most n.
func (s *Store) RecentGroupChats(ctx context.Context, n int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT c.jid FROM chats c JOIN groups g ON g.jid = c.jid
		ORDER BY c.last_activity DESC LIMIT ?`, n)
	if err != nil {
		return nil, fmt.Errorf("messages: recent group chats: %w", err)
	}
	defer rows.Close()
	var jids []string
	for rows.Next() {
		var jid string
		if err := rows.Scan(&jid); err != nil {
			return nil, fmt.Errorf("messages: recent group chats: %w", err)
		}
		jids = append(jids, jid)
	}
	return jids, rows.Err()
}

// Add stores m, with media the marker of its file ("" for none), and
// returns its seq; added is false when the chat already had a message with
// m's id (a redelivery), which is left as it was. A reaction replaces the
// sender's earlier reaction to the same message while that is unanswered;
// one taken back (no emoji) only removes it.
func (s *Store) Add(ctx context.Context, m channel.Message, media string) (seq int64, added bool, err error) {
	// Do: a full disk gives up the daemon's reserve rather than a message
	// its channel may already count as delivered.
	err = s.db.Do(ctx, func(tx *store.Tx) error {
		seq = 0
		if err := addTx(ctx, tx, m, media, &seq); err != nil {
			return err
		}
		if seq > 0 {
			tx.OnCommit(s.wakeIndex)
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("messages: store message %s: %w", m.ID, err)
	}
	return seq, seq > 0, nil
}

// addTx is Add's work in tx; seq is set when m was added.
func addTx(ctx context.Context, tx *store.Tx, m channel.Message, media string, seq *int64) error {
	if m.ReactTo != "" {
		if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE chat_jid = ? AND react_to = ? AND sender = ? AND id != ?
			AND seq > COALESCE((SELECT answered_seq FROM cursors WHERE chat_jid = ?), 0)`, m.ChatJID, m.ReactTo, m.SenderJID, m.ID, m.ChatJID); err != nil {
			return fmt.Errorf("replace a reaction: %w", err)
		}
		if m.Text == "" {
			return nil
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO messages (chat_jid, id, sender, sender_name, text, time, from_me, is_bot,
		quoted_id, quoted_sender, quoted_text, media, react_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		m.ChatJID, m.ID, m.SenderJID, m.SenderName, m.Text, m.Time.UnixMilli(), m.FromMe, m.IsBot,
		m.QuotedID, m.QuotedSender, m.QuotedText, media, m.ReactTo)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n > 0 {
		if *seq, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	return nil
}

// SetMedia replaces the marker of the chat's message id (a voice note's,
// once its transcript is there).
func (s *Store) SetMedia(ctx context.Context, chat, id, media string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE messages SET media = ? WHERE chat_jid = ? AND id = ?`, media, chat, id); err != nil {
		return fmt.Errorf("messages: note the file of message %s: %w", id, err)
	}
	return nil
}

// Lookup returns the chat's message id: who wrote it (their id and shown
// name) and its text, after its file's marker if it has one; ok is false
// when the chat has no such message.
func (s *Store) Lookup(ctx context.Context, chat, id string) (senderID, sender, text string, ok bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT sender, CASE WHEN sender_name != '' THEN sender_name ELSE sender END, trim(media || ' ' || text)
		FROM messages WHERE chat_jid = ? AND id = ?`, chat, id).Scan(&senderID, &sender, &text)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", "", false, nil
	}
	if err != nil {
		return "", "", "", false, fmt.Errorf("messages: look up message %s: %w", id, err)
	}
	return senderID, sender, text, true, nil
}

// unanswered selects the message (chat, id) if the assistant has not
// answered it yet.
const unanswered = `chat_jid = ? AND id = ? AND seq > COALESCE((SELECT answered_seq FROM cursors WHERE chat_jid = ?), 0)`

// Edit gives the chat's message id the new text if it is not answered yet,
// and reports whether it did.
func (s *Store) Edit(ctx context.Context, chat, id, text string) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE messages SET text = ? WHERE `+unanswered, text, chat, id, chat)
	if err != nil {
		return false, fmt.Errorf("messages: edit message %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Revoke deletes the chat's message id if it is not answered yet, so it
// never reaches the agent as if it were current.
func (s *Store) Revoke(ctx context.Context, chat, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM messages WHERE `+unanswered, chat, id, chat); err != nil {
		return fmt.Errorf("messages: delete message %s: %w", id, err)
	}
	return nil
}

// Unanswered returns the chat's messages after its cursor, in one
// statement: it is on the way from a message to its agent.
func (s *Store) Unanswered(ctx context.Context, chat string) ([]Stored, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+storedColumns+` FROM messages m
		WHERE m.chat_jid = ? AND m.is_bot = 0 AND m.seq > COALESCE((SELECT answered_seq FROM cursors WHERE chat_jid = ?), 0)
		ORDER BY m.time, m.seq`, chat, chat)
	if err != nil {
		return nil, fmt.Errorf("messages: read messages of %s: %w", chat, err)
	}
	return scanStored(rows, chat)
}

// UnansweredIn is Unanswered for each of chats (those with none are
// left out), in one statement: the daemon's start asks it of every
// group, and a query per group cost a 100-group start several ms.
func (s *Store) UnansweredIn(ctx context.Context, chats []string) (map[string][]Stored, error) {
	list, err := json.Marshal(chats)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT c.value, `+storedColumns+` FROM json_each(?) AS c
		JOIN messages m ON m.chat_jid = c.value AND m.is_bot = 0
			AND m.seq > COALESCE((SELECT answered_seq FROM cursors WHERE chat_jid = c.value), 0)
		ORDER BY c.value, m.time, m.seq`, list)
	if err != nil {
		return nil, fmt.Errorf("messages: read the unanswered messages of %d chats: %w", len(chats), err)
	}
	defer rows.Close()
	out := map[string][]Stored{}
	for rows.Next() {
		var chat string
		m, err := scanOne(rows, &chat)
		if err != nil {
			return nil, fmt.Errorf("messages: read the unanswered messages of %d chats: %w", len(chats), err)
		}
		out[chat] = append(out[chat], m)
	}
	return out, rows.Err()
}

// After returns the chat's messages (not the assistant's own) with a seq
// above seq, oldest first by the chat's timestamp and then arrival
// (timestamps have one-second resolution on WhatsApp, so they alone cannot
// order a burst).
func (s *Store) After(ctx context.Context, chat string, seq int64) ([]Stored, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+storedColumns+`
		FROM messages m WHERE m.chat_jid = ? AND m.seq > ? AND m.is_bot = 0 ORDER BY m.time, m.seq`, chat, seq)
	if err != nil {
		return nil, fmt.Errorf("messages: read messages of %s: %w", chat, err)
	}
	return scanStored(rows, chat)
}

// storedColumns are what scanOne reads into a Stored.
const storedColumns = `m.seq, m.id, m.sender, CASE WHEN m.sender_name != '' THEN m.sender_name ELSE m.sender END, m.time, m.text,
		m.quoted_id, m.quoted_sender, m.quoted_text, m.media, m.react_to`

// scanStored reads rows of storedColumns (chat's messages) and closes them.
func scanStored(rows *sql.Rows, chat string) ([]Stored, error) {
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		m, err := scanOne(rows)
		if err != nil {
			return nil, fmt.Errorf("messages: read messages of %s: %w", chat, err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// scanOne reads one row of storedColumns, after the columns of first.
func scanOne(rows *sql.Rows, first ...any) (Stored, error) {
	var m Stored
	var ms int64
	err := rows.Scan(append(first, &m.Seq, &m.ID, &m.SenderJID, &m.SenderName, &ms, &m.Text,
		&m.QuotedID, &m.QuotedSender, &m.QuotedText, &m.Media, &m.ReactTo)...)
	m.Time = time.UnixMilli(ms)
	return m, err
}
