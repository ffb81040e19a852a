package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/daemon"
)

func init() {
	register("run", "run   the daemon (also the default)", runDaemon)
}

func runDaemon(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("run", flag.ContinueOnError), args, 0, 0, "run"); err != nil {
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

// newLogger logs JSON to dataDir/logs/nanoclawd.log (rotated by size) and,
// on a terminal, readable lines to stderr.
func newLogger(dataDir string, stderr io.Writer) (zerolog.Logger, func(), error) {
	file, err := daemon.OpenRotatingLog(filepath.Join(dataDir, "logs", "nanoclawd.log"), 10<<20, 3)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	var console io.Writer = stderr
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		console = zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.TimeOnly}
	}
	log := zerolog.New(zerolog.MultiLevelWriter(file, console)).With().Timestamp().Logger()
	return log, func() { file.Close() }, nil
}
