package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nanoclawd/nanoclawd/internal/service"
)

func init() {
	register("service install", "service install [--dry-run]   run nanoclawd as a LaunchAgent (macOS) or systemd user unit (Linux)", serviceInstall)
	register("service uninstall", "service uninstall   stop the service and remove its file", serviceUninstall)
	register("service status", "service status   whether the service is installed and running", serviceStatus)
}

func serviceManager(g *globals) (*service.Manager, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("find your home directory: %w (set HOME)", err)
	}
	return &service.Manager{GOOS: runtime.GOOS, Home: home, UID: os.Getuid(), Out: g.stdout}, nil
}

func serviceInstall(ctx context.Context, g *globals, args []string) error {
	fs := flag.NewFlagSet("service install", flag.ContinueOnError)
	dry := fs.Bool("dry-run", false, "")
	if _, err := parseFlags(fs, args, 0, 0, "service install [--dry-run]"); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	m, err := serviceManager(g)
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err == nil {
		bin, err = filepath.EvalSymlinks(bin)
	}
	if err != nil {
		return fmt.Errorf("find the nanoclawd binary: %w", err)
	}
	spec := service.NewSpec(bin, cfg.File, cfg.DataDir, m.Home)
	return m.Install(ctx, spec, cfg.Agent.Env, *dry)
}

func serviceUninstall(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("service uninstall", flag.ContinueOnError), args, 0, 0, "service uninstall"); err != nil {
		return err
	}
	m, err := serviceManager(g)
	if err != nil {
		return err
	}
	return m.Uninstall(ctx)
}

func serviceStatus(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("service status", flag.ContinueOnError), args, 0, 0, "service status"); err != nil {
		return err
	}
	m, err := serviceManager(g)
	if err != nil {
		return err
	}
	err = m.Status(ctx)
	if errors.Is(err, service.ErrNotInstalled) || errors.Is(err, service.ErrNotRunning) {
		// Exit 3 like systemctl status and LSB init scripts: "not running".
		return exitCode{code: 3, err: err}
	}
	return err
}
