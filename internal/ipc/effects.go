package ipc

import (
	"context"
	"errors"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// newGroup is what register_group asks for.
type newGroup struct {
	JID, Name, Folder string
	Trigger           string   // "" = the default trigger (@assistantName)
	RequiresTrigger   bool     // true unless the file says false
	Senders           []string // who may call its assistant; nil = everyone
}

// effects are what accepted and refused files do to the rest of the
// daemon. The Tx methods run inside the journal transaction that records
// the file, so an effect happens exactly when its record commits: once,
// even across a kill -9. id is the file's journal row, never handed out
// twice. The watcher's are daemonEffects; tests record them instead.
type effects interface {
	// sendMessageTx queues text for chatJID; file, when not nil, is the
	// daemon's copy of the file it carries, which the message owns once
	// tx commits.
	sendMessageTx(ctx context.Context, tx *store.Tx, id int64, fromFolder, chatJID, text string, file *channel.Attachment) error
	// reactTx queues a reaction with emoji to the chat's message messageID.
	reactTx(ctx context.Context, tx *store.Tx, id int64, fromFolder, chatJID, messageID, emoji string) error
	// registerGroupTx registers g, creating its folder; registering the
	// same jid and folder again succeeds. An error wrapping one of
	// groups' sentinel errors refuses the file.
	registerGroupTx(ctx context.Context, tx *store.Tx, id int64, g newGroup) error
	// refusedTx audits a refused file; alert says it also goes to the
	// main group (wrong token or cross-group attempt).
	refusedTx(ctx context.Context, tx *store.Tx, id int64, v security.Violation, alert bool) error
	// noticeTx tells the main chat text once, outside the alert cap (a
	// group's IPC paused by its own flood).
	noticeTx(ctx context.Context, tx *store.Tx, group, text string) error
	// committed follows each journal commit (and a restart's unfinished
	// files): it writes the audit lines of the refusals (the outbox wakes
	// by itself).
	committed(ctx context.Context)
	// refreshGroups rewrites the main group's available_groups.json after
	// the commit; it may be repeated.
	refreshGroups(ctx context.Context) error
}

// daemonEffects are the effects on the daemon's own parts, named in Config.
type daemonEffects struct{ cfg *Config }

func (e daemonEffects) sendMessageTx(ctx context.Context, tx *store.Tx, _ int64, _, chatJID, text string, file *channel.Attachment) error {
	var id int64
	var err error
	if file != nil {
		id, err = e.cfg.Outbox.EnqueueFileTx(ctx, tx, chatJID, text, outbox.KindIPC, *file)
	} else {
		id, err = e.cfg.Outbox.EnqueueTx(ctx, tx, chatJID, text, outbox.KindIPC)
	}
	if err != nil {
		return err
	}
	// What the agent said through send_message is its answer too, for
	// search_history.
	return e.cfg.Messages.RecordAnswerTx(ctx, tx, chatJID, id, text)
}

// reactTx queues the reaction with the author of the message it is about,
// from the chat's record: WhatsApp names both in a reaction.
func (e daemonEffects) reactTx(ctx context.Context, tx *store.Tx, _ int64, _, chatJID, messageID, emoji string) error {
	sender, _, _, _, err := e.cfg.Messages.Lookup(ctx, chatJID, messageID)
	if err != nil {
		return err
	}
	_, err = e.cfg.Outbox.EnqueueReactionTx(ctx, tx, chatJID, messageID, sender, emoji, outbox.KindIPC)
	return err
}

func (e daemonEffects) registerGroupTx(ctx context.Context, tx *store.Tx, _ int64, ng newGroup) error {
	g := groups.Group{JID: ng.JID, Name: ng.Name, Folder: ng.Folder, Trigger: ng.Trigger, RequiresTrigger: ng.RequiresTrigger}
	if g.Trigger == "" {
		g.Trigger = e.cfg.DefaultTrigger()
	}
	if len(ng.Senders) > 0 {
		g.Security = &security.Policy{Senders: ng.Senders}
	}
	err := e.cfg.Groups.AddTx(ctx, tx, g)
	if errors.Is(err, groups.ErrDuplicateJID) {
		if have, lerr := e.cfg.Groups.ByJIDTx(ctx, tx, g.JID); lerr == nil && have.Folder == g.Folder {
			return nil // registered already, under the same folder
		}
	}
	return err
}

func (e daemonEffects) refusedTx(ctx context.Context, tx *store.Tx, _ int64, v security.Violation, alert bool) error {
	return e.cfg.Alerts.RecordTx(ctx, tx, v, alert)
}

func (e daemonEffects) noticeTx(ctx context.Context, tx *store.Tx, group, text string) error {
	return e.cfg.Alerts.NoticeTx(ctx, tx, group, text)
}

func (e daemonEffects) committed(ctx context.Context) {
	if err := e.cfg.Alerts.Flush(ctx); err != nil {
		e.cfg.Log.Error().Err(err).Msg("ipc: audit lines")
	}
}

func (e daemonEffects) refreshGroups(ctx context.Context) error {
	g, err := e.cfg.Groups.Main(ctx)
	if err != nil {
		return err
	}
	return e.cfg.Snapshots.Refresh(ctx, g.Folder, true)
}
