package nanoclaw

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/sessions"
)

// Target is the nanoclawd installation an import goes into.
type Target struct {
	DB             *sql.DB
	Groups         *groups.Registry
	DefaultTrigger string
}

// Result counts what an Apply did (or, dry, would do).
type Result struct {
	Added, Unchanged, Tasks, Sessions, Memories int
}

// Apply carries p out on t, writing one line per action to w. With dry
// set it changes nothing and says what it would do. What is already there
// (a group with the same jid and folder, a task with the same id, a
// session, a CLAUDE.md) is left as it is.
func (p *Plan) Apply(ctx context.Context, t Target, dry bool, w io.Writer) (Result, error) {
	var res Result
	verb := func(do, did string) string {
		if dry {
			return do
		}
		return did
	}
	_, err := t.Groups.Main(ctx)
	haveMain := err == nil
	present := map[string]bool{} // folders registered after the import
	for _, g := range p.Groups {
		existing, err := t.Groups.ByJID(ctx, g.JID)
		if err == nil {
			if existing.Folder != g.Folder {
				return res, fmt.Errorf("%s: already registered with folder %q, NanoClaw has %q; remove one first ('nanoclawd groups remove %s')", g.JID, existing.Folder, g.Folder, existing.Folder)
			}
			fmt.Fprintf(w, "group %s (%s): already registered, unchanged\n", g.Folder, g.JID)
			res.Unchanged++
			present[g.Folder] = true
			continue
		} else if !errors.Is(err, groups.ErrNotFound) {
			return res, err
		}
		gr := g.Group
		if gr.Trigger == "" {
			gr.Trigger = t.DefaultTrigger
		}
		if gr.IsMain && haveMain {
			gr.IsMain = false // there is a main group already; this one is imported as a plain group
		}
		if gr.IsMain {
			gr.RequiresTrigger, haveMain = false, true
		}
		if err := groups.ValidFolder(gr.Folder); err != nil {
			return res, fmt.Errorf("%s: %w", gr.JID, err)
		}
		if err := p.copyMemory(t, gr.Folder, gr.Folder, dry, w, &res); err != nil {
			return res, err
		}
		role := ""
		if gr.IsMain {
			role = " as the main group"
		}
		fmt.Fprintf(w, "group %s (%s)%s: %s\n", gr.Folder, gr.JID, role, verb("would add", "added"))
		if !dry {
			if err := t.Groups.Add(ctx, gr); err != nil {
				return res, fmt.Errorf("%s: %w", gr.JID, err)
			}
		}
		res.Added++
		present[gr.Folder] = true
	}
	if err := p.copyMemory(t, groups.GlobalFolder, groups.GlobalFolder, dry, w, &res); err != nil {
		return res, err
	}
	for _, task := range p.Tasks {
		if !present[task.GroupFolder] {
			fmt.Fprintf(w, "task %s: skipped, its group %s is not registered\n", task.ID, task.GroupFolder)
			continue
		}
		what := fmt.Sprintf("task %s (%s, %s %s, %s)", task.ID, task.GroupFolder, task.ScheduleType, task.ScheduleValue, task.Status)
		if dry {
			var n int
			if err := t.DB.QueryRowContext(ctx, `SELECT count(*) FROM scheduled_tasks WHERE id = ?`, task.ID).Scan(&n); err != nil {
				return res, err
			}
			if n > 0 {
				fmt.Fprintf(w, "%s: already there, unchanged\n", what)
				continue
			}
			fmt.Fprintf(w, "%s: would add\n", what)
			res.Tasks++
			continue
		}
		added, err := scheduler.Insert(ctx, t.DB, task)
		if err != nil {
			return res, err
		}
		if !added {
			fmt.Fprintf(w, "%s: already there, unchanged\n", what)
			continue
		}
		fmt.Fprintf(w, "%s: added\n", what)
		res.Tasks++
	}
	for _, s := range p.Sessions {
		if !present[s.Folder] {
			continue
		}
		have, err := sessions.Get(ctx, t.DB, s.Folder)
		if err != nil {
			return res, err
		}
		switch {
		case have == s.ID:
			fmt.Fprintf(w, "session of %s: already there, unchanged\n", s.Folder)
		case have != "":
			fmt.Fprintf(w, "session of %s: keeps its own session %s\n", s.Folder, have)
		default:
			fmt.Fprintf(w, "session of %s: %s %s (if its transcript is not found, the first run starts fresh)\n", s.Folder, verb("would resume", "resumes"), s.ID)
			if !dry {
				if err := sessions.Set(ctx, t.DB, s.Folder, s.ID); err != nil {
					return res, err
				}
			}
			res.Sessions++
		}
	}
	for _, s := range p.Skipped {
		fmt.Fprintf(w, "not imported: %s\n", s)
	}
	return res, nil
}

// copyMemory copies NanoClaw's groups/<from>/CLAUDE.md to our
// <groupsDir>/<to>/CLAUDE.md unless ours exists.
func (p *Plan) copyMemory(t Target, from, to string, dry bool, w io.Writer, res *Result) error {
	if p.GroupsDir == "" {
		return nil
	}
	src := filepath.Join(p.GroupsDir, from, groups.MemoryFile)
	body, err := os.ReadFile(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	dst := filepath.Join(t.Groups.Dir(to), groups.MemoryFile)
	if _, err := os.Stat(dst); err == nil {
		fmt.Fprintf(w, "memory %s: %s exists, kept\n", src, dst)
		return nil
	}
	if dry {
		fmt.Fprintf(w, "memory %s: would copy to %s\n", src, dst)
	} else {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, body, 0o644); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		fmt.Fprintf(w, "memory %s: copied to %s\n", src, dst)
	}
	res.Memories++
	return nil
}
