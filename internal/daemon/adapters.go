package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/ipc"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

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

// spending is the usage store as /groups reads it: each group's spend
// and whether its budget is spent, as status shows them.
type spending struct{ d *Daemon }

func (s spending) Spending(ctx context.Context, gs []groups.Group) (map[string]usage.GroupSpend, error) {
	cfg := s.d.Config()
	return s.d.usage.Spending(ctx, gs, cfg.Agent.Budget, time.Now(), cfg.Location())
}

// runView is what g's runs can read, for the IPC watcher: a file a group
// sends is read only as far as its run could (its user, its denyRead).
// Other groups' folders need no listing here: a file outside the
// sender's own folder is refused before its view is looked at.
func (d *Daemon) runView(g groups.Group) ipc.RunView {
	if g.IsMain {
		return ipc.RunView{}
	}
	cfg := d.Config()
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(nil))
	return ipc.RunView{Confined: true, User: cfg.Agent.RunAs.User(), DenyRead: eff.DenyRead}
}

// groupTrigger is the trigger of the group registered for a chat, for a
// channel that has other ways of calling the assistant (a Telegram reply
// to the bot, its @username): "" when no group, or one without a trigger.
type groupTrigger struct{ reg *groups.Registry }

func (t groupTrigger) Of(ctx context.Context, jid string) string {
	g, err := t.reg.ByJID(ctx, jid)
	if err != nil || g.IsMain || !g.RequiresTrigger {
		return ""
	}
	return g.Trigger
}

// skippedUpdates puts in the audit trail a Telegram update the channel
// gave up storing: under its chat's group, else the main group's.
type skippedUpdates struct{ d *Daemon }

func (s skippedUpdates) Skipped(ctx context.Context, jid string, id int64, cause error) {
	folder, _, _ := s.d.reg.MainChat(ctx)
	if g, err := s.d.reg.ByJID(ctx, jid); err == nil {
		folder = g.Folder
	}
	v := security.Violation{Time: time.Now(), Group: folder, Kind: "channel", Tool: "telegram", Target: fmt.Sprintf("update %d of %s", id, jid),
		Detail: fmt.Sprintf("not stored after several tries, so skipped (the message is lost): %v", cause)}
	err := s.d.db.Do(ctx, func(tx *store.Tx) error { return s.d.reporter.RecordTx(ctx, tx, v, false) })
	if err == nil {
		err = s.d.reporter.Flush(ctx)
	}
	if err != nil {
		s.d.log.Error().Err(err).Int64("update_id", id).Str("chat", jid).Msg("audit a skipped Telegram update")
	}
}
