package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/daemon"
	"github.com/nanoclawd/nanoclawd/internal/spec"
)

// backupSource is cfg's install as backup and restore see it; loading cfg
// read nanoclawd.env, which may name the main group's Claude config dir.
func backupSource(cfg *config.Config) backup.Source {
	return backup.NewSource(cfg.Layout(), cfg.File, spec.MainClaudeDir(cfg, os.LookupEnv))
}

// backupCommand is 'nanoclawd backup'.
type backupCommand struct{}

func (backupCommand) Usage() string { return "backup [--to DIR] [--verify]" }

func (c backupCommand) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	to := fs.String("to", "", "the directory `DIR` the archive goes to (default: backup.dir, else backups/ in the data directory)")
	verify := fs.Bool("verify", false, "read the archive back: every checksum, and an integrity check of each database copy")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	dir := *to
	if dir == "" {
		dir = cfg.Backup.Dir
	}
	if dir == "" {
		dir = cfg.Layout().Backups()
	}
	progress := func(s string) { fmt.Fprintln(g.stderr, "backup:", s) }
	src := backupSource(cfg)
	src.Main = reg.MainFolder
	res, err := backup.Create(ctx, src, dir, backup.Options{Verify: *verify, Progress: progress})
	if rerr := backup.Record(cfg.Layout(), time.Now(), res, err); rerr != nil {
		fmt.Fprintln(g.stderr, "nanoclawd: warning:", rerr)
	}
	if err != nil {
		return err
	}
	for _, s := range res.Skipped {
		fmt.Fprintf(g.stderr, "backup: left out %s: %s\n", s.Path, s.Reason)
	}
	how := ""
	if res.Verified {
		how = ", verified"
	}
	fmt.Fprintf(g.stdout, "%s\n", res.Archive)
	fmt.Fprintf(g.stderr, "backup: %d files, %.1f MB%s; the archive holds secrets (WhatsApp's keys, nanoclawd.env): keep it private\n",
		res.Files, float64(res.Bytes)/1e6, how)
	return nil
}

// restoreCommand is 'nanoclawd restore'.
type restoreCommand struct{}

func (restoreCommand) Usage() string { return "restore ARCHIVE [--dry-run]" }

func (c restoreCommand) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	dry := fs.Bool("dry-run", false, "list what would be written and what replaced, and change nothing")
	pos, err := g.parse(c, fs, args, 1)
	if err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	archive := pos[0]
	if !*dry {
		lock, err := daemon.Lock(cfg.DataDir)
		if errors.Is(err, daemon.ErrLocked) {
			return fmt.Errorf("restore refused: %w", err)
		}
		if err != nil {
			return err
		}
		defer lock.Close()
	}
	dst := backupSource(cfg)
	plan, m, err := backup.Plan(ctx, archive, dst)
	if err != nil {
		if errors.Is(err, backup.ErrCorrupt) {
			return fmt.Errorf("restore refused, nothing was written: %w; use another archive", err)
		}
		return err
	}
	verb := map[bool]string{false: "write", true: "replace"}
	if *dry {
		fmt.Fprintf(g.stdout, "%s (made %s from %s) would restore into data %s, groups %s:\n",
			archive, m.Created.Local().Format("2006-01-02 15:04"), m.Source.DataDir, cfg.DataDir, cfg.GroupsDir)
	}
	var beside []string
	written := 0
	for _, a := range plan {
		if a.Target != "" {
			written++
		}
		switch {
		case a.Kept != "" && a.Target == "":
			if *dry {
				fmt.Fprintf(g.stdout, "  keep     %s (the same as the archived one)\n", a.Kept)
			}
		case a.Kept != "":
			beside = append(beside, fmt.Sprintf("the archived %s differs from %s, which is kept: it is written to %s", a.Entry, a.Kept, a.Target))
			if *dry {
				fmt.Fprintf(g.stdout, "  %-8s %s (beside your %s, which is kept)\n", verb[a.Replace], a.Target, a.Kept)
			}
		case *dry:
			fmt.Fprintf(g.stdout, "  %-8s %s\n", verb[a.Replace], a.Target)
		}
	}
	if *dry {
		return nil
	}
	if err := backup.Apply(ctx, archive, dst, plan); err != nil {
		return err
	}
	fmt.Fprintf(g.stdout, "restored %d files from %s into %s and %s\n", written, archive, cfg.DataDir, cfg.GroupsDir)
	for _, b := range beside {
		fmt.Fprintln(g.stdout, b+": compare them and keep what you want")
	}
	for _, w := range restoredPathWarnings(plan, cfg) {
		fmt.Fprintln(g.stderr, "restore: warning:", w)
	}
	if _, err := os.Stat(cfg.Layout().WhatsAppDB()); err != nil && cfg.Channels.WhatsApp.Enabled {
		fmt.Fprintln(g.stdout, "the archive held no WhatsApp session: pair with `nanoclawd whatsapp login`")
	}
	return nil
}
