package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/nanoclawd/nanoclawd/internal/status"
)

// consoleCommand is 'nanoclawd console'.
type consoleCommand struct{}

func (consoleCommand) Usage() string { return "console [--url]" }

func (c consoleCommand) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	onlyURL := fs.Bool("url", false, "only print the login URL; open no browser")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	opener := ""
	if !*onlyURL {
		opener = browser()
	}
	login, err := status.ConsoleLogin(ctx, cfg.DataDir, opener != "")
	if err != nil {
		return err
	}
	fmt.Fprintln(g.stdout, login.URL)
	if opener == "" {
		return nil
	}
	// The browser is given the daemon's private page that opens the URL,
	// never the URL: a command line is readable by every user (ps,
	// /proc/PID/cmdline). The daemon removes the page once it is used.
	if err := exec.Command(opener, login.File).Start(); err != nil {
		fmt.Fprintf(g.stderr, "nanoclawd: could not open a browser (%v): open the URL above yourself, within 10 minutes\n", err)
	}
	return nil
}

// browser is the program that opens a file in the desktop's browser, ""
// for none (a server without a display: the printed URL is enough).
func browser() string {
	if runtime.GOOS == "darwin" {
		return "open"
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return ""
	}
	if p, err := exec.LookPath("xdg-open"); err == nil {
		return p
	}
	return ""
}
