package alerts

// The second alert path: when the main chat cannot be reached (WhatsApp
// logged out, or down for longer than alerts.cooldown), the alerts waiting
// for it are also handed to alerts.fallback, a command that gets their
// text on stdin (a macOS notification, ntfy, mail). They stay queued for
// the main chat, folded into one message, and go out once it is back.

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Link is the state of the channel that carries the main chat.
type Link interface {
	// Outage says since when the main chat's channel has been unable to
	// send (zero: it can send), and whether it was logged out, which no
	// waiting mends.
	Outage() (since time.Time, loggedOut bool)
}

// Fallback hands alerts to alerts.fallback while the main chat is out of
// reach. Build it with its fields set; Run it beside the Reporter.
type Fallback struct {
	DB       *store.DB
	Command  []string      // argv, no shell; the text comes on stdin
	Cooldown time.Duration // how long an outage lasts before alerts take this path
	Link     Link
	Main     MainChat
	Out      *outbox.Outbox
	Now      func() time.Time // time.Now when nil
	Log      zerolog.Logger
}

// fallbackTimeout bounds one run of the command: a hung notifier must not
// hold up the next alerts.
const fallbackTimeout = time.Minute

func (f *Fallback) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Run hands waiting alerts to the command whenever the main chat is out of
// reach, until ctx ends. It looks every few seconds (a quarter of the
// cooldown, between 1 and 15 s): an alert waits in the outbox meanwhile.
func (f *Fallback) Run(ctx context.Context) error {
	tick := time.NewTicker(min(max(f.Cooldown/4, time.Second), 15*time.Second))
	defer tick.Stop()
	for {
		if _, err := f.Deliver(ctx); err != nil && ctx.Err() == nil {
			f.Log.Error().Err(err).Msg("alerts.fallback")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Deliver hands every alert waiting for the main chat, and not handed over
// yet, to the command if the main chat is out of reach now; it returns how
// many. Two or more are folded into one text, and into one message for the
// main chat in their place.
func (f *Fallback) Deliver(ctx context.Context) (int, error) {
	if len(f.Command) == 0 {
		return 0, nil
	}
	since, loggedOut := f.Link.Outage()
	if since.IsZero() || (!loggedOut && f.now().Sub(since) < f.Cooldown) {
		return 0, nil
	}
	_, jid, ok := f.Main.MainChat(ctx)
	if !ok {
		return 0, nil
	}
	rows, err := f.DB.QueryContext(ctx, `SELECT id, text FROM outbox
		WHERE chat_jid = ? AND kind IN (?, ?, ?) AND sent_at IS NULL AND failed_at IS NULL
		  AND id NOT IN (SELECT outbox_id FROM alert_fallbacks) ORDER BY id`,
		jid, outbox.KindAlert, outbox.KindSummary, outbox.KindOutage)
	if err != nil {
		return 0, fmt.Errorf("alerts.fallback: read waiting alerts: %w", err)
	}
	var ids []int64
	var texts []string
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return 0, fmt.Errorf("alerts.fallback: %w", err)
		}
		ids, texts = append(ids, id), append(texts, text)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return 0, err
	}
	why := fmt.Sprintf("disconnected since %s", since.Local().Format("2006-01-02 15:04"))
	if loggedOut {
		why = "logged out"
	}
	text := texts[0]
	if len(texts) > 1 {
		text = fmt.Sprintf("nanoclawd: %d alerts could not reach the main chat (WhatsApp %s):\n\n%s", len(texts), why, strings.Join(texts, "\n\n"))
	}
	if err := f.run(ctx, text); err != nil {
		return 0, err
	}
	return len(ids), f.record(ctx, jid, ids, texts)
}

// run starts the command with text on stdin and waits for it.
func (f *Fallback) run(ctx context.Context, text string) error {
	ctx, cancel := context.WithTimeout(ctx, fallbackTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.Command[0], f.Command[1:]...)
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("alerts.fallback %q failed: %w: %s (check the command in the config)", f.Command[0], err, strings.TrimSpace(out.String()))
	}
	return nil
}

// record notes the alerts as handed over and, for two or more, folds them
// into one message for the main chat.
func (f *Fallback) record(ctx context.Context, jid string, ids []int64, texts []string) error {
	tx, err := f.DB.Begin(ctx)
	if err != nil {
		return fmt.Errorf("alerts.fallback: begin: %w", err)
	}
	defer tx.Rollback()
	done := ids
	if len(ids) > 1 {
		folded := fmt.Sprintf("%d alerts while WhatsApp could not reach this chat (each was also sent through alerts.fallback):\n\n%s",
			len(ids), strings.Join(texts, "\n\n"))
		id, err := f.Out.FoldTx(ctx, tx, ids, jid, folded, outbox.KindSummary)
		if err != nil {
			return err
		}
		done = []int64{id}
	}
	for _, id := range done {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO alert_fallbacks (outbox_id, sent_at) VALUES (?, ?)`, id, f.now().UnixNano()); err != nil {
			return fmt.Errorf("alerts.fallback: record: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("alerts.fallback: commit: %w", err)
	}
	return nil
}

// Outage queues text for the main chat as outbox.KindOutage and hands it to the
// command at once (with whatever else waits), for the logout that is about
// to stop the daemon.
func (f *Fallback) Outage(ctx context.Context, text string) error {
	_, jid, ok := f.Main.MainChat(ctx)
	if ok {
		if _, err := f.Out.Enqueue(ctx, jid, text, outbox.KindOutage); err != nil {
			return err
		}
	}
	if !ok && len(f.Command) > 0 {
		return f.run(ctx, text) // no main chat to keep it for: the command is all there is
	}
	_, err := f.Deliver(ctx)
	return err
}
