package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/ipc"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// ipcGroups adapts the registry to the IPC watcher.
type ipcGroups struct{ reg *groups.Registry }

func (a ipcGroups) lookup(g groups.Group, err error) (ipc.Group, bool, error) {
	if errors.Is(err, groups.ErrNotFound) {
		return ipc.Group{}, false, nil
	}
	if err != nil {
		return ipc.Group{}, false, err
	}
	return ipc.Group{JID: g.JID, Folder: g.Folder, IsMain: g.IsMain}, true, nil
}

func (a ipcGroups) GroupByFolder(ctx context.Context, folder string) (ipc.Group, bool, error) {
	return a.lookup(a.reg.ByFolder(ctx, folder))
}

func (a ipcGroups) GroupByJID(ctx context.Context, jid string) (ipc.Group, bool, error) {
	return a.lookup(a.reg.ByJID(ctx, jid))
}

// ipcEffects carries out IPC files inside the watcher's journal
// transaction, so each happens exactly when its file is recorded.
type ipcEffects struct{ d *Daemon }

func (e ipcEffects) SendMessageTx(ctx context.Context, tx *store.Tx, _ int64, _, chatJID, text string, file *channel.Attachment) error {
	var err error
	if file != nil {
		_, err = e.d.outbox.EnqueueFileTx(ctx, tx, chatJID, text, outbox.KindIPC, *file)
	} else {
		_, err = e.d.outbox.EnqueueTx(ctx, tx, chatJID, text, outbox.KindIPC)
	}
	return err
}

// ReactTx queues the reaction with the author of the message it is
// about, from the chat's record: WhatsApp names both in a reaction.
func (e ipcEffects) ReactTx(ctx context.Context, tx *store.Tx, _ int64, _, chatJID, messageID, emoji string) error {
	sender, _, _, _, err := e.d.messages.Lookup(ctx, chatJID, messageID)
	if err != nil {
		return err
	}
	_, err = e.d.outbox.EnqueueReactionTx(ctx, tx, chatJID, messageID, sender, emoji, outbox.KindIPC)
	return err
}

func (e ipcEffects) RegisterGroupTx(ctx context.Context, tx *store.Tx, _ int64, ng ipc.NewGroup) error {
	g := groups.Group{JID: ng.JID, Name: ng.Name, Folder: ng.Folder, Trigger: ng.Trigger, RequiresTrigger: ng.RequiresTrigger}
	if g.Trigger == "" {
		g.Trigger = e.d.Config().DefaultTrigger()
	}
	if len(ng.Senders) > 0 {
		g.Security = &security.Policy{Senders: ng.Senders}
	}
	err := e.d.reg.AddTx(ctx, tx, g)
	if errors.Is(err, groups.ErrDuplicateJID) {
		if have, lerr := e.d.reg.ByJID(ctx, g.JID); lerr == nil && have.Folder == g.Folder {
			return nil // registered already, under the same folder
		}
	}
	if err == nil {
		// Before the commit: should the transaction roll back, the next
		// reload of the registry only unwatches a folder never registered.
		e.d.mu.Lock()
		if e.d.watched != nil {
			e.d.watched[g.Folder] = true
		}
		e.d.mu.Unlock()
	}
	return err
}

func (e ipcEffects) RefusedTx(ctx context.Context, tx *store.Tx, _ int64, v security.Violation, alert bool) error {
	return e.d.reporter.RecordTx(ctx, tx, v, alert)
}

func (e ipcEffects) Committed(ctx context.Context) {
	if err := e.d.reporter.Flush(ctx); err != nil {
		e.d.log.Error().Err(err).Msg("ipc: audit lines")
	}
}

func (e ipcEffects) RefreshGroups(ctx context.Context) error {
	g, err := e.d.reg.Main(ctx)
	if err != nil {
		return err
	}
	return e.d.snapshots.Refresh(ctx, g.Folder, true)
}

// chats lists chats for available_groups.json: every chat seen, and
// whether it is registered.
type chats struct {
	*messages.Store
	reg *groups.Registry
}

func (c chats) IsRegistered(ctx context.Context, jid string) (bool, error) {
	_, err := c.reg.ByJID(ctx, jid)
	if errors.Is(err, groups.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

var _ ipc.Chats = chats{}

// mainLink is the state of the channel that carries the main chat, for
// alerts.fallback: a channel that can say when it lost its connection
// (WhatsApp) does; any other is taken as always able to send.
type mainLink struct{ d *Daemon }

func (l mainLink) Outage() (time.Time, bool) {
	_, jid, ok := l.d.reg.MainChat(context.Background())
	if !ok {
		return time.Time{}, false
	}
	for _, ch := range l.d.channels {
		if ch.Owns(jid) {
			if o, ok := ch.(alerts.Link); ok {
				return o.Outage()
			}
			break
		}
	}
	return time.Time{}, false
}

// loggedOutText is what the owner is told when WhatsApp logs the daemon out.
func loggedOutText(at time.Time) string {
	return fmt.Sprintf("[WHATSAPP LOGGED OUT] WhatsApp unlinked nanoclawd's device at %s, and the daemon stopped. "+
		"Run `nanoclawd whatsapp login` on its machine to pair again; alerts wait until then.", at.Local().Format("2006-01-02 15:04"))
}

// spendToday is the usage store as /groups reads it: what a group spent
// today and whether it is over its budget.
type spendToday struct{ d *Daemon }

func (s spendToday) Today(ctx context.Context, folder string) (float64, bool, error) {
	cfg, now := s.d.Config(), time.Now()
	g, err := s.d.reg.ByFolder(ctx, folder)
	if err != nil {
		return 0, false, err
	}
	usd, err := s.d.usage.Spent(ctx, folder, usage.Today(now, cfg.Location()))
	if err != nil {
		return 0, false, err
	}
	b := security.EffectiveBudget(cfg.Agent.Budget, g.Security, g.IsMain)
	over, err := s.d.usage.Over(ctx, folder, usage.Periods(now, cfg.Location(), b.Daily, b.Monthly))
	return usd, over, err
}
