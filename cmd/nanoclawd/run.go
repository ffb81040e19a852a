package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/daemon"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/logfile"
	"github.com/nanoclawd/nanoclawd/internal/service"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// runCommand is 'nanoclawd run', the daemon.
type runCommand struct{}

func (runCommand) Usage() string { return "run" }

func (c runCommand) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	log, closeLog, err := newLogger(cfg.DataDir, g.stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	// loadConfig read nanoclawd.env first; the watcher reads it again.
	fromFile := config.FromEnvFile()
	if len(fromFile) > 0 {
		log.Info().Strs("variables", fromFile).Msg("read " + service.EnvFileName)
	}
	// A second SIGTERM/SIGINT stops at once: the first one cancelled ctx and
	// the daemon is shutting down gracefully.
	go func() {
		<-ctx.Done()
		again := make(chan os.Signal, 1)
		notifyStop(again)
		<-again
		log.Warn().Msg("second signal: stopping now")
		os.Exit(130)
	}()
	if err := g.firstRun(ctx, cfg, fromFile, log); err != nil {
		return err
	}
	d, err := daemon.New(ctx, cfg, log)
	if err != nil {
		return err
	}
	err = d.Run(ctx)
	if errors.Is(err, daemon.ErrStopForGood) {
		// Exit 0: launchd (KeepAlive SuccessfulExit=false) and systemd
		// (Restart=on-failure) must not restart into the same wall.
		log.Error().Err(err).Msg("nanoclawd stopped and will not be restarted by the service manager")
		return nil
	}
	return err
}

// firstRun says what stands between this install and a first answer. On
// a terminal it offers to do it there, before the daemon starts (so a new
// pairing needs no restart); off one (a service) it never waits for input
// and logs the list once.
func (g *globals) firstRun(ctx context.Context, cfg *config.Config, fromFile []string, log zerolog.Logger) error {
	if _, err := status.Fetch(ctx, cfg.DataDir); err == nil {
		return nil // another daemon runs here; daemon.New says so
	}
	db, err := store.Open(cfg.DataDir)
	if err != nil {
		return err
	}
	defer db.Close()
	guide := g.guide(cfg, groups.New(db, cfg.GroupsDir), fromFile)
	guide.DB = db
	missing, err := guide.Missing(ctx)
	if err != nil || len(missing) == 0 {
		return err
	}
	if !g.interactive() {
		for i, m := range missing {
			log.Warn().Str("step", m.Step).Msgf("before a first answer (%d/%d): %s", i+1, len(missing), m.Problem)
		}
		return nil
	}
	if err := guide.Run(ctx, true); err != nil {
		if ctx.Err() != nil {
			return exitCode{code: 130} // Ctrl-C during the questions: stop quietly
		}
		return err
	}
	fmt.Fprintln(g.stdout, "Starting the daemon (Ctrl-C stops it).")
	return nil
}

// newLogger logs JSON to dataDir/logs/nanoclawd.log (rotated by size) and,
// on a terminal, readable lines to stderr.
func newLogger(dataDir string, stderr io.Writer) (zerolog.Logger, func(), error) {
	file, err := logfile.Open(layout.New(dataDir, "").DaemonLog(), 10<<20, 3)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	// On a terminal, readable lines from info up (debug stays in the
	// file); under a service manager, whose stderr file is not rotated,
	// only warnings and errors (the JSON log has all).
	var console zerolog.LevelWriter = zerolog.LevelWriterAdapter{Writer: stderr}
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		console = minLevel{zerolog.LevelWriterAdapter{Writer: zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly}}, zerolog.InfoLevel}
	} else {
		console = minLevel{console, zerolog.WarnLevel}
	}
	log := zerolog.New(zerolog.MultiLevelWriter(file, console)).With().Timestamp().Logger()
	return log, func() { file.Close() }, nil
}

// minLevel drops what is below its level.
type minLevel struct {
	zerolog.LevelWriter
	min zerolog.Level
}

func (w minLevel) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	if l < w.min {
		return len(p), nil
	}
	return w.LevelWriter.WriteLevel(l, p)
}
