package daemon

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/ipc"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
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

// actions carries out accepted IPC files. Each key is done at most once.
type actions struct{ d *Daemon }

// once runs f inside a transaction that also records key, unless key was
// recorded before.
func (a actions) once(ctx context.Context, key string, f func(tx *sql.Tx) error) error {
	tx, err := a.d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO done_keys (key, done_at) VALUES (?, ?)`, key, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil
	}
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

func (a actions) SendMessage(ctx context.Context, key, fromFolder, chatJID, text string, file *channel.Attachment) error {
	err := a.once(ctx, key, func(tx *sql.Tx) error {
		var err error
		if file != nil {
			_, err = outbox.EnqueueFileTx(ctx, tx, chatJID, text, outbox.KindIPC, *file)
		} else {
			_, err = outbox.EnqueueTx(ctx, tx, chatJID, text, outbox.KindIPC)
		}
		return err
	})
	if err == nil {
		a.d.outbox.Wake()
	}
	return err
}

func (a actions) RegisterGroup(ctx context.Context, key string, ng ipc.NewGroup) error {
	g := groups.Group{JID: ng.JID, Name: ng.Name, Folder: ng.Folder, Trigger: ng.Trigger, RequiresTrigger: ng.RequiresTrigger}
	if g.Trigger == "" {
		g.Trigger = a.d.Config().DefaultTrigger()
	}
	if len(ng.Senders) > 0 {
		g.Security = &security.Policy{Senders: ng.Senders}
	}
	err := a.d.reg.Add(ctx, g)
	if errors.Is(err, groups.ErrDuplicateJID) {
		if have, lerr := a.d.reg.ByJID(ctx, g.JID); lerr == nil && have.Folder == g.Folder {
			return nil // registered by this same file before a crash
		}
	}
	if err == nil {
		a.d.mu.Lock()
		if a.d.watched != nil {
			a.d.watched[g.Folder] = true
		}
		a.d.mu.Unlock()
	}
	return err
}

func (a actions) RefreshGroups(ctx context.Context) error {
	g, err := a.d.reg.Main(ctx)
	if err != nil {
		return err
	}
	a.d.beforeRun(ctx, g)
	return nil
}

// Violation records a refused file once: the audit row, the alert and the
// key's done-mark commit together.
func (a actions) Violation(ctx context.Context, key string, v security.Violation, alert bool) error {
	return a.d.reporter.RecordOnce(ctx, v, alert, func(tx *sql.Tx) (bool, error) {
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO done_keys (key, done_at) VALUES (?, ?)`, key, time.Now().UnixMilli())
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	})
}

// chats lists chats for available_groups.json.
type chats struct{ d *Daemon }

func (c chats) ListChats(ctx context.Context) ([]channel.Chat, error) {
	return c.d.messages.ListChats(ctx)
}

func (c chats) IsRegistered(ctx context.Context, jid string) (bool, error) {
	_, err := c.d.reg.ByJID(ctx, jid)
	if errors.Is(err, groups.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

var _ scheduler.Chats = chats{}
