package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mattn/go-isatty"

	"github.com/nanoclawd/nanoclawd/internal/channel/whatsapp"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/setup"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

// setupCommand is 'nanoclawd setup'.
type setupCommand struct{}

func (setupCommand) Usage() string { return "setup" }

func (c setupCommand) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	guide := g.guide(cfg, reg, config.FromEnvFile())
	guide.DB = db
	rep, err := status.Fetch(ctx, cfg.DataDir)
	if err == nil {
		guide.Running = rep.PID
	}
	if err := guide.Run(ctx, false); err != nil {
		return err
	}
	if guide.Running == 0 {
		return nil // no daemon runs: the next one starts with all of it
	}
	// A daemon that started before the pairing waits for one and connects
	// by itself; channels are read only at its start.
	for _, c := range rep.Channels {
		if c.Name == "whatsapp" && !c.Connected && guide.PairedNow {
			fmt.Fprintf(g.stdout, "The daemon running now (PID %d) started before the pairing: it connects WhatsApp with it within a few seconds.\n", rep.PID)
		}
	}
	if guide.TelegramOnNow {
		fmt.Fprintf(g.stdout, "The daemon running now (PID %d) started without the Telegram channel: restart it to poll the bot.\n", rep.PID)
	}
	if guide.LocalOnNow {
		fmt.Fprintf(g.stdout, "The daemon running now (PID %d) started without the local channel: restart it (Ctrl-C where it runs, then 'make run') to serve it.\n", rep.PID)
	}
	return nil
}

// newPairer is the WhatsApp pairing the guide uses; the terminal tests
// replace it with a fake.
var newPairer = func(dataDir string) setup.Pairer { return whatsappPairer{dataDir} }

// guide is the setup guide on this process's stdin and g.stdout.
func (g *globals) guide(cfg *config.Config, reg *groups.Registry, fromFile []string) *setup.Guide {
	gd := &setup.Guide{
		Config: cfg, Groups: reg, Pairer: newPairer(cfg.DataDir),
		Cred: setup.Credentials{
			EnvFile: config.EnvFile(cfg.File), FromFile: fromFile,
			Getenv: os.Getenv, Setenv: os.Setenv, APIBase: os.Getenv("ANTHROPIC_BASE_URL"),
		},
		Command: typed(cfg),
		Changed: func() { notifyDaemon(cfg) },
		In:      bufio.NewReader(os.Stdin),
		Out:     g.stdout,
	}
	if fd := int(os.Stdin.Fd()); isatty.IsTerminal(uintptr(fd)) {
		gd.NoEcho = func() func() {
			restore, err := noEcho(fd)
			if err != nil {
				return func() {}
			}
			return restore
		}
	}
	return gd
}

// typed is nanoclawd as the owner types it in this directory: bin/nanoclawd
// from the repository, nanoclawd when PATH found it, else its absolute path;
// with --config when cfg is not the default config here.
func typed(cfg *config.Config) string {
	name := os.Args[0]
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err == nil {
			name = abs
		}
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, abs); err == nil && filepath.IsLocal(rel) {
				name = rel
				if !strings.Contains(rel, "/") {
					name = "./" + rel // a bare name would be looked up on PATH
				}
			}
		}
	}
	if def, err := filepath.Abs(config.DefaultFile); err != nil || def != cfg.File {
		name += " --config " + cfg.File
	}
	return name
}

// interactive reports whether a person is at this process's terminal:
// stdin and stdout both are one.
func (g *globals) interactive() bool {
	out, ok := g.stdout.(*os.File)
	return ok && isatty.IsTerminal(out.Fd()) && isatty.IsTerminal(os.Stdin.Fd())
}

// whatsappPairer is the real pairing: the WhatsApp channel's login.
type whatsappPairer struct{ dataDir string }

func (p whatsappPairer) Paired(ctx context.Context) (string, bool, error) {
	// Without whatsapp.db nothing is paired (and opening would create it).
	if _, err := os.Stat(whatsapp.StoreFile(p.dataDir)); errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	own, err := whatsapp.Paired(ctx, p.dataDir)
	if errors.Is(err, whatsapp.ErrNotPaired) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return own.String(), true, nil
}

func (p whatsappPairer) Pair(ctx context.Context, phone string, out io.Writer) (string, error) {
	own, err := whatsapp.Login(ctx, whatsapp.LoginOptions{DataDir: p.dataDir, Phone: phone, Out: out})
	if errors.Is(err, whatsapp.ErrAlreadyPaired) {
		err = nil
	}
	return own.String(), err
}
