package whatsapp

import (
	"context"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow/types"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// groupSyncInterval: names are also refreshed on every group-info event,
// so the daily pass only catches what those missed.
const groupSyncInterval = 24 * time.Hour

func (c *Channel) groupName(jid types.JID) string {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	return c.groupNames[jid]
}

// noteGroup records a group's name and passes it to the sink.
func (c *Channel) noteGroup(jid types.JID, name string, at time.Time) {
	if name == "" {
		return
	}
	c.groupMu.Lock()
	c.groupNames[jid] = name
	c.groupMu.Unlock()
	ctx, sink := c.sinkContext()
	if sink == nil {
		return
	}
	if err := c.told.Tell(ctx, sink, channel.Chat{JID: jid.String(), Name: name, IsGroup: true, Time: at}); err != nil {
		c.log.Warn().Err(err).Str("chat", jid.String()).Msg("could not store a WhatsApp group name")
	}
}

// syncGroups fetches every group we are in and records its name.
func (c *Channel) syncGroups(ctx context.Context, list func(context.Context) ([]*types.GroupInfo, error)) error {
	groups, err := list(ctx)
	if err != nil {
		return fmt.Errorf("list WhatsApp groups: %w", err)
	}
	for _, g := range groups {
		at := g.NameSetAt
		if at.IsZero() {
			at = c.clock.Now()
		}
		c.noteGroup(g.JID, g.Name, at)
	}
	c.log.Debug().Int("groups", len(groups)).Msg("WhatsApp group names synced")
	return nil
}

func (c *Channel) syncGroupsNow() {
	cli := c.currentClient()
	ctx, _ := c.sinkContext()
	if cli == nil || !c.Connected() {
		return
	}
	c.syncGroupsWith(ctx, cli.GetJoinedGroups)
}

// syncGroupsWith syncs and remembers when it last succeeded.
func (c *Channel) syncGroupsWith(ctx context.Context, list func(context.Context) ([]*types.GroupInfo, error)) {
	if err := c.syncGroups(ctx, list); err != nil {
		c.log.Warn().Err(err).Msg("WhatsApp group name sync failed; retrying at the next connect or daily sync")
		return
	}
	c.groupMu.Lock()
	c.groupsSynced = c.clock.Now()
	c.groupMu.Unlock()
}

// groupsStale says whether the cached group list is older than a day: a
// reconnect then fetches it again, else it is kept (every fetch is an IQ
// WhatsApp counts, and reconnects can come often).
func (c *Channel) groupsStale() bool {
	c.groupMu.Lock()
	defer c.groupMu.Unlock()
	return c.groupsSynced.IsZero() || c.clock.Now().Sub(c.groupsSynced) >= groupSyncInterval
}

// syncGroupsDaily refreshes group names once a day until ctx ends.
func (c *Channel) syncGroupsDaily(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(groupSyncInterval):
			c.syncGroupsNow()
		}
	}
}
