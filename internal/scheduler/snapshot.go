package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// The files agents read in their IPC directory, as NanoClaw writes them.
const (
	TasksFile  = "current_tasks.json"
	GroupsFile = "available_groups.json"
)

// WriteTasksSnapshot writes <ipcRoot>/<folder>/current_tasks.json: every
// task for the main group, the group's own tasks otherwise. The daemon calls
// it before each run; afterwards the scheduler keeps it current on changes.
func (s *Scheduler) WriteTasksSnapshot(ctx context.Context, folder string, isMain bool) error {
	s.mu.Lock()
	s.snapshots[folder] = isMain
	s.mu.Unlock()
	return s.writeTasks(ctx, folder, isMain)
}

func (s *Scheduler) writeTasks(ctx context.Context, folder string, isMain bool) error {
	filter := folder
	if isMain {
		filter = ""
	}
	tasks, err := s.List(ctx, filter)
	if err != nil {
		return err
	}
	return writeJSON(filepath.Join(s.ipcRoot, folder, TasksFile), tasks)
}

func (s *Scheduler) rewriteSnapshots(ctx context.Context) {
	s.mu.Lock()
	folders := make(map[string]bool, len(s.snapshots))
	for f, m := range s.snapshots {
		folders[f] = m
	}
	s.mu.Unlock()
	for f, isMain := range folders {
		if err := s.writeTasks(ctx, f, isMain); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Str("group", f).Msg("scheduler: rewrite current_tasks.json")
		}
	}
}

// AvailableGroup is one chat in available_groups.json.
type AvailableGroup struct {
	JID          string `json:"jid"`
	Name         string `json:"name"`
	LastActivity string `json:"lastActivity"`
	IsRegistered bool   `json:"isRegistered"`
}

// Chats is where the chat list comes from (the daemon's chat table and
// group registry).
type Chats interface {
	ListChats(ctx context.Context) ([]channel.Chat, error)
	IsRegistered(ctx context.Context, jid string) (bool, error)
}

// WriteGroupsSnapshot writes <ipcRoot>/<folder>/available_groups.json. Only
// the main group may register groups, so only it sees the group chats, most
// recently active first; other groups get an empty list.
func WriteGroupsSnapshot(ctx context.Context, ipcRoot, folder string, isMain bool, chats Chats, now time.Time) error {
	groups := []AvailableGroup{}
	if isMain {
		list, err := chats.ListChats(ctx)
		if err != nil {
			return fmt.Errorf("list chats: %w", err)
		}
		sort.SliceStable(list, func(i, j int) bool { return list[i].Time.After(list[j].Time) })
		for _, c := range list {
			if !c.IsGroup {
				continue
			}
			reg, err := chats.IsRegistered(ctx, c.JID)
			if err != nil {
				return fmt.Errorf("look up chat %s: %w", c.JID, err)
			}
			groups = append(groups, AvailableGroup{JID: c.JID, Name: c.Name,
				LastActivity: c.Time.UTC().Format(time.RFC3339Nano), IsRegistered: reg})
		}
	}
	return writeJSON(filepath.Join(ipcRoot, folder, GroupsFile), struct {
		Groups   []AvailableGroup `json:"groups"`
		LastSync string           `json:"lastSync"`
	}{groups, now.UTC().Format(time.RFC3339Nano)})
}

// writeJSON replaces path atomically, so an agent never reads half a file.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, data, 0o600)
}
