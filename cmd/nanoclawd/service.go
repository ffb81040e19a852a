package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/nanoclawd/nanoclawd/internal/service"
)

func serviceManager(g *globals) (*service.Manager, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return nil, fmt.Errorf("find your home directory: %w (set HOME)", err)
	}
	return &service.Manager{GOOS: runtime.GOOS, Home: home, UID: os.Getuid(), Out: g.stdout}, nil
}

// serviceInstall is 'nanoclawd service install'.
type serviceInstall struct{}

func (serviceInstall) Usage() string { return "service install [--dry-run]" }

func (c serviceInstall) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	dry := fs.Bool("dry-run", false, "print the service file and the commands that would load it, and change nothing")
	if _, err := g.parse(c, fs, args, 0); err != nil {
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

// serviceUninstall is 'nanoclawd service uninstall'.
type serviceUninstall struct{}

func (serviceUninstall) Usage() string { return "service uninstall" }

func (c serviceUninstall) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	m, err := serviceManager(g)
	if err != nil {
		return err
	}
	return m.Uninstall(ctx)
}

// serviceStatus is 'nanoclawd service status'; it exits 3 when the
// service is not installed or not running.
type serviceStatus struct{}

func (serviceStatus) Usage() string { return "service status" }

func (c serviceStatus) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
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
