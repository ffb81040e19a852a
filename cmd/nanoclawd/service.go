package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/nanoclawd/nanoclawd/internal/service"
)

func serviceManager(g *globals, system bool, goos string) (*service.Manager, error) {
	owner, err := serviceOwner(system)
	if err != nil {
		return nil, err
	}
	uid, _ := strconv.Atoi(owner.Uid)
	return &service.Manager{GOOS: goos, Home: owner.HomeDir, UID: uid, Out: g.stdout, Notes: g.stderr, System: system}, nil
}

// servicePlatforms are the names --for takes, and their GOOS.
var servicePlatforms = map[string]string{"macos": "darwin", "linux": "linux"}

// serviceOwner is the account the service runs as: this user, or with
// --system under sudo the user who ran sudo (a LaunchDaemon is installed
// as root but runs as its owner, whose home holds the LaunchAgent).
func serviceOwner(system bool) (*user.User, error) {
	if name := os.Getenv("SUDO_USER"); system && os.Getuid() == 0 && name != "" && name != "root" {
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("find the account %s that ran sudo: %w", name, err)
		}
		return u, nil
	}
	if !system {
		// No account lookup: $HOME and the uid are all a LaunchAgent or
		// user unit needs, also for a uid without a passwd entry.
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("find your home directory: %w (set HOME)", err)
		}
		return &user.User{Uid: strconv.Itoa(os.Getuid()), HomeDir: home}, nil
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("find your account: %w", err)
	}
	return u, nil
}

// serviceInstall is 'nanoclawd service install'.
type serviceInstall struct{}

func (serviceInstall) Usage() string {
	return "service install [--dry-run] [--for macos|linux] [--system]"
}

func (c serviceInstall) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	dry := fs.Bool("dry-run", false, "print the service file (alone on stdout; where it goes and the commands that would load it on stderr), and change nothing")
	target := fs.String("for", "", "with --dry-run: the `OS` whose file is printed, macos (the launchd plist) or linux (the systemd user unit); default this one")
	system := fs.Bool("system", false, "macOS: a LaunchDaemon that starts at boot, before anyone logs in, as you (run with sudo); replaces the LaunchAgent")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	goos := runtime.GOOS
	if *target != "" {
		var known bool
		if goos, known = servicePlatforms[*target]; !known {
			return g.usageError(c, "--for %q: name macos or linux", *target)
		}
		if goos != runtime.GOOS && !*dry {
			return g.usageError(c, "--for %s only prints a file (add --dry-run): install writes this machine's service", *target)
		}
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	m, err := serviceManager(g, *system, goos)
	if err != nil {
		return err
	}
	if *system && !*dry && os.Getuid() != 0 && runtime.GOOS == "darwin" {
		return fmt.Errorf("service install --system writes /Library/LaunchDaemons and needs root: run 'sudo nanoclawd service install --system' (the daemon itself runs as you)")
	}
	bin, err := os.Executable()
	if err == nil {
		bin, err = filepath.EvalSymlinks(bin)
	}
	if err != nil {
		return fmt.Errorf("find the nanoclawd binary: %w", err)
	}
	spec := service.NewSpec(bin, cfg.File, cfg.DataDir, m.Home)
	if *system {
		owner, err := serviceOwner(true)
		if err != nil {
			return err
		}
		spec.User = owner.Username
	}
	return m.Install(ctx, spec, cfg.Agent.Env, *dry)
}

// serviceUninstall is 'nanoclawd service uninstall'.
type serviceUninstall struct{}

func (serviceUninstall) Usage() string { return "service uninstall [--system]" }

func (c serviceUninstall) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	system := fs.Bool("system", false, "remove the LaunchDaemon (macOS, with sudo) instead of the LaunchAgent")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	m, err := serviceManager(g, *system, runtime.GOOS)
	if err != nil {
		return err
	}
	return m.Uninstall(ctx)
}

// serviceStatus is 'nanoclawd service status'; it exits 3 when the
// service is not installed or not running.
type serviceStatus struct{}

func (serviceStatus) Usage() string { return "service status [--system]" }

func (c serviceStatus) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	system := fs.Bool("system", false, "the LaunchDaemon (macOS) instead of the LaunchAgent")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	m, err := serviceManager(g, *system, runtime.GOOS)
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
