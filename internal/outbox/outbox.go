// Package outbox owns every outgoing message: agents' replies, IPC
// messages, the daemon's notices and alerts are queued in the outbox table
// (alone, or inside the caller's transaction with EnqueueTx) and sent per
// chat, in order, with backoff, until the channel accepts them.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Sender delivers one message. It must return nil only once the channel
// accepted the message, and be safe for concurrent use (the outbox sends to
// different chats in parallel, never two messages to one chat at once).
type Sender interface {
	Send(ctx context.Context, m channel.Outgoing) error
}

// Kinds of outbox rows (free text in the table; these are the ones nanoclawd uses).
const (
	KindAlert   = "alert"   // a first [SANDBOX ALERT]
	KindSummary = "summary" // a folded "+N more" alert
	KindReply   = "reply"   // an agent's answer
	KindIPC     = "ipc"     // a message an agent sent through IPC
	KindNotice  = "notice"  // a message of the daemon itself to a group
	KindOutage  = "outage"  // the main chat's channel was lost (a logout); alerts.fallback carries it too
)

// ErrNoChat is returned by Enqueue for an empty chat JID.
var ErrNoChat = errors.New("outbox: no chat JID given")

// sentRetention is how long sent (and failed) rows are kept (for the
// record) before Run deletes them.
const sentRetention = 7 * 24 * time.Hour

// tellAgain is how long after telling the main group that a chat cannot be
// reached the outbox stays quiet about further failures to that chat.
const tellAgain = 24 * time.Hour

// Outbox is the durable queue of every outgoing message. Enqueue commits a
// row; Run sends rows in id order per chat and marks each sent only after
// the Sender accepted it, so nothing is lost when a channel is down or the
// daemon dies, and nothing is sent twice unless the daemon dies between a
// Send and its mark (then the stable Outgoing.ID lets the channel drop it).
type Outbox struct {
	db   *store.DB
	main MainChat
	send Sender
	log  zerolog.Logger

	// MinBackoff and MaxBackoff bound the wait before retrying a chat whose
	// Send failed: MinBackoff doubled per consecutive failure, capped.
	// Set them before Run.
	MinBackoff, MaxBackoff time.Duration
	// GiveUpAfter bounds how long a message whose sends keep failing with an
	// unexplained error is retried before it is marked failed, so one bad
	// message cannot hold up its chat forever. Errors wrapping
	// channel.ErrUnavailable (the channel is down) never count: those
	// messages wait for the channel. Set before Run.
	GiveUpAfter time.Duration

	installMu sync.Mutex
	install   string // the install id, once read

	wake chan struct{} // capacity 1: "look at the table again"

	mu       sync.Mutex
	chats    map[string]*chatState
	notifies uint64 // Notify calls so far; a send failing across one is retried at once
}

// chatState is what the outbox knows in memory about one chat.
type chatState struct {
	lock    chan struct{} // capacity 1; held by whoever is sending to the chat
	fails   int           // consecutive failed sends
	retryAt time.Time     // no automatic send before this
}

// MainChat names the main group, told once when messages to a chat are
// dropped as undeliverable; ok is false while there is none.
type MainChat interface {
	MainChat(ctx context.Context) (folder, jid string, ok bool)
}

// New returns an outbox over db (migrated by store.Open) that sends
// through sender and tells main (nil: no one) what it drops. Nothing is
// sent until Run is called.
func New(db *store.DB, sender Sender, main MainChat, log zerolog.Logger) *Outbox {
	return &Outbox{
		db:          db,
		send:        sender,
		main:        main,
		log:         log,
		MinBackoff:  500 * time.Millisecond,
		MaxBackoff:  time.Minute,
		GiveUpAfter: time.Hour,
		wake:        make(chan struct{}, 1),
		chats:       map[string]*chatState{},
	}
}

// Wake makes Run look for new rows at once. Every enqueue has it called
// after its commit; Notify and the senders call it too.
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Notify says sending may work again (a channel reconnected): chats waiting
// out a backoff are retried at once.
func (o *Outbox) Notify() {
	o.mu.Lock()
	o.notifies++
	for _, c := range o.chats {
		c.retryAt = time.Time{}
	}
	o.mu.Unlock()
	o.Wake()
}

// Run sends queued messages until ctx ends: at start it resumes every
// unsent row, then it wakes on Wake/Notify and on backoff timers only.
// Each chat gets its own sender goroutine, so a chat whose channel is down
// does not hold up the others; within a chat, order is id order.
func (o *Outbox) Run(ctx context.Context) error {
	old := time.Now().Add(-sentRetention).UnixNano()
	if _, err := o.db.ExecContext(ctx, `DELETE FROM outbox WHERE sent_at < ? OR failed_at < ?`, old, old); err != nil {
		o.log.Warn().Err(err).Msg("outbox: pruning old sent messages failed")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		next := o.dispatch(ctx, &wg)
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-o.wake:
		case <-timer.C:
		}
	}
}

// dispatch starts a sender for every chat with unsent rows that is neither
// busy nor backing off, and returns the earliest retry time of those that
// are backing off (zero if none).
func (o *Outbox) dispatch(ctx context.Context, wg *sync.WaitGroup) time.Time {
	chats, err := o.waitingChats(ctx)
	if err != nil {
		if ctx.Err() == nil {
			o.log.Error().Err(err).Msg("outbox: reading queued messages failed; retrying")
		}
		return time.Now().Add(o.MinBackoff)
	}

	var next time.Time
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, chat := range chats {
		st := o.state(chat)
		if now.Before(st.retryAt) {
			if next.IsZero() || st.retryAt.Before(next) {
				next = st.retryAt
			}
			continue
		}
		select {
		case st.lock <- struct{}{}:
		default:
			continue // a sender is already on it; it re-reads the table before it stops
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer o.Wake() // rows may have arrived after its last look
			defer func() { <-st.lock }()
			o.drain(ctx, chat, st)
		}()
	}
	return next
}

// state returns the chat's state, creating it. o.mu must be held.
func (o *Outbox) state(chat string) *chatState {
	st := o.chats[chat]
	if st == nil {
		st = &chatState{lock: make(chan struct{}, 1)}
		o.chats[chat] = st
	}
	return st
}

// drain sends the chat's unsent rows in order until none is left or one
// fails and will be retried. A row given up on (undeliverable, or failing
// for longer than GiveUpAfter) is marked failed and the chat moves on.
// The caller holds st.lock.
func (o *Outbox) drain(ctx context.Context, chat string, st *chatState) error {
	install, err := o.installID(ctx)
	if err != nil {
		return o.failed(ctx, chat, st, 0, err)
	}
	for {
		queued, err := o.next(ctx, chat)
		if err != nil {
			return o.failed(ctx, chat, st, 0, fmt.Errorf("read queued messages: %w", err))
		}
		if len(queued) == 0 {
			return nil
		}
		for _, q := range queued {
			if err := o.sendOne(ctx, chat, st, install, q); err != nil {
				return err
			}
		}
	}
}

// queued is one unsent row of the outbox.
type queued struct {
	id        int64
	text      string
	firstFail sql.NullInt64
	file      *channel.Attachment
	// A reaction: text is the emoji for the message reactTo by reactSender.
	reactTo, reactSender string
}

// drainBatch is how many queued rows of a chat are read at once: one
// query for a burst instead of one a message.
const drainBatch = 64

// next reads the chat's oldest unsent messages, in order.
func (o *Outbox) next(ctx context.Context, chat string) ([]queued, error) {
	rows, err := o.db.QueryContext(ctx,
		`SELECT id, text, first_error_at, file_path, file_name, file_mime, COALESCE(react_to, ''), COALESCE(react_sender, '') FROM outbox
		 WHERE chat_jid = ? AND sent_at IS NULL AND failed_at IS NULL ORDER BY id LIMIT ?`,
		chat, drainBatch)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []queued
	for rows.Next() {
		var q queued
		var path, name, mime sql.NullString
		if err := rows.Scan(&q.id, &q.text, &q.firstFail, &path, &name, &mime, &q.reactTo, &q.reactSender); err != nil {
			return nil, err
		}
		if path.Valid {
			q.file = &channel.Attachment{Name: name.String, MIME: mime.String, Path: path.String}
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// sendOne sends q and marks it sent, or gives it up when it can never
// go; a non-nil error stops the chat's drain until its retry.
func (o *Outbox) sendOne(ctx context.Context, chat string, st *chatState, install string, q queued) error {
	o.mu.Lock()
	gen := o.notifies
	o.mu.Unlock()
	out := channel.Outgoing{ID: MessageKey(install, q.id), ChatJID: chat, Text: q.text, File: q.file,
		ReactTo: q.reactTo, ReactSender: q.reactSender}
	if err := o.send.Send(ctx, out); err != nil {
		if ctx.Err() == nil && o.hopeless(err, q.firstFail) {
			if gerr := o.giveUp(ctx, chat, q.id, err); gerr != nil {
				return o.failed(ctx, chat, st, 0, gerr)
			}
			o.dropFile(q.file)
			return nil
		}
		o.failed(ctx, chat, st, q.id, err)
		o.mu.Lock()
		if o.notifies != gen {
			// The channel came back while this send was failing.
			st.retryAt = time.Time{}
		}
		o.mu.Unlock()
		return err
	}
	// The message is out; if marking it fails it will be offered again
	// later with the same ID, which the channel may use to drop it.
	if _, err := o.db.ExecContext(context.WithoutCancel(ctx),
		`UPDATE outbox SET sent_at = ?, attempts = attempts + 1, last_error = NULL WHERE id = ?`,
		time.Now().UnixNano(), q.id); err != nil {
		return o.failed(ctx, chat, st, 0, fmt.Errorf("mark message %d sent: %w", q.id, err))
	}
	o.dropFile(q.file)
	o.mu.Lock()
	st.fails, st.retryAt = 0, time.Time{}
	o.mu.Unlock()
	return nil
}

// Flush tries once, now, to send everything queued (ignoring backoffs),
// waiting for senders already at work. It is meant for shutdown, with a
// deadline in ctx, and works whether or not Run is still running. What it
// cannot send stays queued for the next start; the error says how much.
func (o *Outbox) Flush(ctx context.Context) error {
	chats, err := o.waitingChats(ctx)
	if err != nil {
		return fmt.Errorf("outbox: flush: %w", err)
	}
	var errs []error
	for _, chat := range chats {
		o.mu.Lock()
		st := o.state(chat)
		o.mu.Unlock()
		select {
		case st.lock <- struct{}{}:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("chat %s: %w", chat, ctx.Err()))
			continue
		}
		if err := o.drain(ctx, chat, st); err != nil {
			errs = append(errs, fmt.Errorf("chat %s: %w", chat, err))
		}
		<-st.lock
	}
	if len(errs) > 0 {
		var n int
		o.db.QueryRowContext(context.Background(), `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND failed_at IS NULL`).Scan(&n)
		return fmt.Errorf("outbox: %d messages still queued (they are sent at the next start): %w", n, errors.Join(errs...))
	}
	return nil
}

// waitingChats lists the chats with messages to send.
func (o *Outbox) waitingChats(ctx context.Context) ([]string, error) {
	rows, err := o.db.QueryContext(ctx,
		`SELECT DISTINCT chat_jid FROM outbox WHERE sent_at IS NULL AND failed_at IS NULL AND chat_jid IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var chats []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		chats = append(chats, c)
	}
	return chats, rows.Err()
}
