package nanoclaw

// Applying what Read found: groups, tasks, sessions and notes go into
// nanoclawd's registry, scheduler and folders, each step said in a line.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Target is where an import goes.
type Target struct {
	DB             *store.DB
	Registry       *groups.Registry
	Scheduler      *scheduler.Scheduler
	DefaultTrigger string
}

// Apply imports in into t, or with dryRun only says what it would do. Each
// step is one line on out.
func Apply(ctx context.Context, in *Install, t Target, dryRun bool, out io.Writer) error {
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	verb := func(s string) string {
		if dryRun {
			return "would " + s
		}
		return s
	}
	_, err := t.Registry.Main(ctx)
	haveMain := err == nil
	added := map[string]bool{}
	kept, tasks, sessions := 0, 0, 0
	defer func() {
		done := "imported"
		if dryRun {
			done = "would import"
		}
		say("%s %d group(s), %d already registered; %d task(s), %d session id(s)", done, len(added), kept, tasks, sessions)
	}()
	for _, ng := range in.Groups {
		if existing, err := t.Registry.ByJID(ctx, ng.JID); err == nil {
			if existing.Folder != ng.Folder {
				return fmt.Errorf("%s: already registered with folder %q, NanoClaw has %q; remove one first", ng.JID, existing.Folder, ng.Folder)
			}
			say("keep group %s (%s): already registered", ng.Folder, ng.JID)
			kept++
			continue
		} else if !errors.Is(err, groups.ErrNotFound) {
			return err
		}
		g := groups.Group{JID: ng.JID, Name: ng.Name, Folder: ng.Folder, Trigger: ng.Trigger, RequiresTrigger: ng.RequiresTrigger}
		if g.Trigger == "" {
			g.Trigger = t.DefaultTrigger
		}
		if ng.IsMain && !haveMain {
			g.IsMain, g.RequiresTrigger, haveMain = true, false, true
		} else if ng.IsMain {
			say("note: %s was NanoClaw's main group, but a main group is registered already: it is added as an ordinary group", ng.Folder)
		}
		if at, err := time.Parse(time.RFC3339Nano, ng.AddedAt); err == nil {
			g.AddedAt = at
		}
		if p := policyOf(ng.Mounts); p != nil && !g.IsMain {
			g.Security = p
		}
		kind := "group"
		if g.IsMain {
			kind = "main group"
		}
		say("%s %s %s (%s, trigger %q)%s", verb("add"), kind, g.Folder, g.JID, g.Trigger, mountNote(g.Security))
		if dryRun {
			added[g.Folder] = true
			continue
		}
		if err := t.Registry.Add(ctx, g); err != nil {
			return fmt.Errorf("%s: %w", ng.JID, err)
		}
		added[g.Folder] = true
		if ng.Notes != "" {
			if err := writeNotes(ctx, t, g.Folder, ng.Notes, true); err != nil {
				return err
			}
		}
	}
	for _, ng := range in.Groups {
		if added[ng.Folder] && ng.Notes != "" {
			say("%s %s/CLAUDE.md (%d bytes)", verb("copy"), ng.Folder, len(ng.Notes))
		}
	}
	if in.GlobalNotes != "" {
		path := filepath.Join(t.Registry.Dir(layout.GlobalFolder), layout.MemoryFile)
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
			say("keep global/CLAUDE.md: one exists")
		} else {
			say("%s global/CLAUDE.md (%d bytes)", verb("copy"), len(in.GlobalNotes))
			if !dryRun {
				if err := writeNotes(ctx, t, layout.GlobalFolder, in.GlobalNotes, false); err != nil {
					return err
				}
			}
		}
	}
	if tasks, err = importTasks(ctx, in, t, dryRun, say, verb, added); err != nil {
		return err
	}
	for _, ng := range in.Groups {
		id, ok := in.Sessions[ng.Folder]
		if !ok {
			continue
		}
		var have string
		err := t.DB.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, ng.Folder).Scan(&have)
		if err == nil {
			say("keep the session of %s", ng.Folder)
			continue
		}
		say("%s the session id of %s (its transcript stays in NanoClaw; if it cannot be resumed, the first run starts fresh)", verb("record"), ng.Folder)
		sessions++
		if !dryRun {
			if _, err := t.DB.ExecContext(ctx, `INSERT OR IGNORE INTO sessions (folder, session_id, updated_at) VALUES (?, ?, ?)`,
				ng.Folder, id, time.Now().UnixMilli()); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeNotes writes folder's CLAUDE.md — replacing it, or only when there
// is none — through groupfs: a folder may hold a link an earlier group's
// agent left there, which is replaced, never written through.
func writeNotes(ctx context.Context, t Target, folder, notes string, replace bool) error {
	dir, err := groupfs.Open(t.Registry.Dir(folder), folder, 0o755, nil)
	if err != nil {
		return err
	}
	defer dir.Close()
	if replace {
		return dir.Put(layout.MemoryFile, []byte(notes), 0o644)
	}
	_, err = dir.Create(ctx, layout.MemoryFile, []byte(notes), 0o644)
	return err
}

func importTasks(ctx context.Context, in *Install, t Target, dryRun bool, say func(string, ...any), verb func(string) string, added map[string]bool) (int, error) {
	existing, err := t.Scheduler.List(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	same := func(nt Task) bool {
		for _, e := range existing {
			if e.GroupFolder == nt.Folder && e.Prompt == nt.Prompt && e.ScheduleType == nt.ScheduleType && e.ScheduleValue == nt.ScheduleValue {
				return true
			}
		}
		return false
	}
	for _, nt := range in.Tasks {
		if same(nt) {
			say("keep task %s of %s: imported before", nt.ID, nt.Folder)
			continue
		}
		if _, err := t.Registry.ByFolder(ctx, nt.Folder); err != nil && !(dryRun && added[nt.Folder]) {
			say("skip task %s: its group %s is not registered", nt.ID, nt.Folder)
			continue
		}
		say("%s task %s of %s (%s %s, %s)", verb("add"), nt.ID, nt.Folder, nt.ScheduleType, nt.ScheduleValue, nt.Status)
		n++
		if dryRun {
			continue
		}
		task, err := createTask(ctx, t, nt)
		if err != nil {
			say("skip task %s of %s: %v", nt.ID, nt.Folder, err)
			n--
			continue
		}
		existing = append(existing, task)
	}
	if !dryRun {
		t.Scheduler.Changed()
	}
	return n, nil
}

func createTask(ctx context.Context, t Target, nt Task) (scheduler.Task, error) {
	tx, err := t.DB.Begin(ctx)
	if err != nil {
		return scheduler.Task{}, err
	}
	defer tx.Rollback()
	mode := nt.ContextMode
	if !scheduler.ValidContextMode(mode) {
		mode = scheduler.ContextIsolated
	}
	task, err := t.Scheduler.Create(ctx, tx, scheduler.NewTask{GroupFolder: nt.Folder, ChatJID: nt.ChatJID, Prompt: nt.Prompt,
		ScheduleType: nt.ScheduleType, ScheduleValue: nt.ScheduleValue, ContextMode: mode})
	if err != nil {
		return task, err
	}
	if nt.Status == "paused" {
		if err := t.Scheduler.Pause(ctx, tx, task.ID); err != nil {
			return task, err
		}
	}
	return task, tx.Commit()
}

// policyOf turns NanoClaw's extra container mounts into an override:
// read-only mounts (the default there) become allowRead, writable ones
// allowWrite.
func policyOf(mounts []Mount) *security.Policy {
	if len(mounts) == 0 {
		return nil
	}
	p := &security.Policy{}
	for _, m := range mounts {
		if m.HostPath == "" {
			continue
		}
		if m.ReadOnly != nil && !*m.ReadOnly {
			p.AllowWrite = append(p.AllowWrite, m.HostPath)
		} else {
			p.AllowRead = append(p.AllowRead, m.HostPath)
		}
	}
	return p
}

func mountNote(p *security.Policy) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(", its extra mounts as allowRead %v and allowWrite %v", p.AllowRead, p.AllowWrite)
}
