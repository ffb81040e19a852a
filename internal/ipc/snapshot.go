package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Snapshots writes the files an agent reads in its IPC directory, as
// NanoClaw writes them: current_tasks.json (every task for the main group,
// a group's own otherwise) and available_groups.json (the group chats, for
// the main group, which alone may register groups). Refresh writes both
// before a run; TasksChanged keeps the task lists of every group seen so
// far current when tasks change.
//
// A file is rewritten only when what it lists changed: Refresh runs before
// every agent starts, and two files replaced each time were most of the
// daemon's part of an agent's start (about 1.4 ms of 2). So
// available_groups.json's lastSync is when its list was last written.
type Snapshots struct {
	layout layout.Layout
	db     *store.DB        // the scheduler's tasks are read with scheduler.ListTasks
	chats  *messages.Store  // every chat seen
	groups *groups.Registry // which of them are registered
	log    zerolog.Logger

	mu   sync.Mutex
	seen map[string]bool // folder → isMain, for TasksChanged

	// writeMu makes reading a list and writing its file one step, so a
	// slower writer holding an older list cannot replace a newer one; it
	// also guards written.
	writeMu sync.Mutex
	written map[string][]byte // path → the list it holds, as last written
}

// NewSnapshots returns the writer of the snapshot files under l.
func NewSnapshots(l layout.Layout, db *store.DB, chats *messages.Store, reg *groups.Registry, log zerolog.Logger) *Snapshots {
	return &Snapshots{layout: l, db: db, chats: chats, groups: reg, log: log, seen: map[string]bool{}, written: map[string][]byte{}}
}

// AvailableGroup is one chat in available_groups.json.
type AvailableGroup struct {
	JID          string `json:"jid"`
	Name         string `json:"name"`
	LastActivity string `json:"lastActivity"`
	IsRegistered bool   `json:"isRegistered"`
}

// Refresh writes both files for folder.
func (s *Snapshots) Refresh(ctx context.Context, folder string, isMain bool) error {
	s.mu.Lock()
	s.seen[folder] = isMain
	s.mu.Unlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.writeTasks(ctx, folder, isMain); err != nil {
		return err
	}
	return s.writeGroups(ctx, folder, isMain, time.Now())
}

// TasksChanged rewrites current_tasks.json of every group refreshed so
// far (the scheduler calls it after a change or a run).
func (s *Snapshots) TasksChanged(ctx context.Context) {
	s.mu.Lock()
	folders := make(map[string]bool, len(s.seen))
	for f, m := range s.seen {
		folders[f] = m
	}
	s.mu.Unlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	for f, isMain := range folders {
		if err := s.writeTasks(ctx, f, isMain); err != nil && ctx.Err() == nil {
			s.log.Warn().Err(err).Str("group", f).Msg("rewrite current_tasks.json")
		}
	}
}

func (s *Snapshots) writeTasks(ctx context.Context, folder string, isMain bool) error {
	filter := folder
	if isMain {
		filter = ""
	}
	tasks, err := scheduler.ListTasks(ctx, s.db, filter)
	if err != nil {
		return err
	}
	return s.write(s.layout.IPC(folder).TasksSnapshot(), tasks, func(list []byte) any { return json.RawMessage(list) })
}

func (s *Snapshots) writeGroups(ctx context.Context, folder string, isMain bool, now time.Time) error {
	available := []AvailableGroup{}
	if isMain {
		list, err := s.chats.ListChats(ctx)
		if err != nil {
			return fmt.Errorf("list chats: %w", err)
		}
		sort.SliceStable(list, func(i, j int) bool { return list[i].Time.After(list[j].Time) })
		for _, c := range list {
			if !c.IsGroup {
				continue
			}
			_, err := s.groups.ByJID(ctx, c.JID)
			if err != nil && !errors.Is(err, groups.ErrNotFound) {
				return fmt.Errorf("look up chat %s: %w", c.JID, err)
			}
			available = append(available, AvailableGroup{JID: c.JID, Name: c.Name,
				LastActivity: c.Time.UTC().Format(time.RFC3339Nano), IsRegistered: err == nil})
		}
	}
	return s.write(s.layout.IPC(folder).GroupsSnapshot(), available, func(list []byte) any {
		return struct {
			Groups   json.RawMessage `json:"groups"`
			LastSync string          `json:"lastSync"`
		}{list, now.UTC().Format(time.RFC3339Nano)}
	})
}

// write replaces path atomically, so an agent never reads half a file,
// with file(list) — unless path exists and already holds list. Call with
// writeMu held.
func (s *Snapshots) write(path string, list any, file func(list []byte) any) error {
	l, err := json.Marshal(list)
	if err != nil {
		return err
	}
	if bytes.Equal(s.written[path], l) {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
	}
	data, err := json.MarshalIndent(file(l), "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Readable by the run, which may be another user than the daemon; the
	// group's IPC dir (its own, 0700) keeps everyone else out.
	if err := atomicfile.Put(path, data, 0o644); err != nil {
		return err
	}
	s.written[path] = l
	return nil
}
