// Package setup is the guided first run: it finds what stands between a
// fresh install and a first answer (WhatsApp pairing, a main chat, a model
// credential), lists it, and on a terminal offers to do each step there.
// `nanoclawd run` and `nanoclawd setup` share it; every step looks at the
// state first, so running it again changes nothing that is already done.
package setup

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Pairer links nanoclawd to the owner's WhatsApp account. The WhatsApp
// channel's login (QR code or pairing code) is the real one; tests pass a
// fake.
type Pairer interface {
	// Paired returns the account's own chat JID ("message yourself"), or
	// ok false when nothing is paired yet.
	Paired(ctx context.Context) (own string, ok bool, err error)
	// Pair shows a QR code on out (phone "") or a pairing code for phone,
	// and returns once the phone has linked this device.
	Pair(ctx context.Context, phone string, out io.Writer) (own string, err error)
}

// Guide is one run of the guided setup.
type Guide struct {
	Config *config.Config
	Groups *groups.Registry
	Pairer Pairer
	Cred   Credentials
	// Changed tells a running daemon that the registry changed.
	Changed func()

	// Command is nanoclawd as the owner types it here, with --config when
	// the config is not the default one: "bin/nanoclawd" from the
	// repository. Every hint the guide gives starts with it.
	Command string

	In  *bufio.Reader
	Out io.Writer
	// PairedNow is set by Run when it paired WhatsApp; LocalOnNow when it
	// turned the local channel on; TelegramOnNow the Telegram channel.
	PairedNow, LocalOnNow, TelegramOnNow bool
	// DB keeps the Telegram owner (who sent the setup code). TelegramCode,
	// when set, is the code to send instead of a random one (tests).
	DB           *store.DB
	TelegramCode string

	// Running is the PID of a daemon that runs on this install already
	// (0: none): it reads a key saved here again by itself.
	Running int

	// NoEcho, on a terminal, stops it echoing what is typed until the
	// returned func is called (for a pasted secret); nil on other input.
	NoEcho func() (restore func())
}

// Item is one thing missing before a first answer.
type Item struct {
	Step    string // "whatsapp", "main chat", "credential"
	What    string // what is missing (the guide's list, where it does the rest)
	Problem string // what is missing and how to fix it without the guide
}

// item is the Item of step: what is missing, then how to fix it.
func item(step, what, fix string) Item { return Item{step, what, what + ": " + fix} }

func (i Item) String() string { return i.Step + ": " + i.Problem }

// state is what the steps found.
type state struct {
	own      string // the paired WhatsApp account, "" if none
	main     *groups.Group
	onWA     bool   // a registered group is a WhatsApp chat
	needWA   bool   // a first answer waits for WhatsApp (NeedsWhatsApp)
	credName string // the credential variable that is set, "" if none
	keyless  bool   // no group needs the daemon's own credential (CredentialNeeded)
	// noCred, once the credential step ran, says why agents still have no
	// usable credential and the command that fixes it ("" = they have one).
	noCred string
}

// cmd is a command line for the owner to type: nanoclawd as they type it,
// then args.
func (g *Guide) cmd(args string) string {
	return cmp.Or(g.Command, "nanoclawd") + " " + args
}

func (g *Guide) look(ctx context.Context) (state, []Item, error) {
	var s state
	var items []Item
	cfg := g.Config
	list, err := g.Groups.List(ctx)
	if err != nil {
		return s, nil, err
	}
	for _, gr := range list {
		if gr.IsMain {
			s.main = &gr
		}
	}
	s.onWA, s.needWA = onWhatsApp(list), NeedsWhatsApp(list)
	if cfg.Channels.WhatsApp.Enabled {
		own, ok, err := g.Pairer.Paired(ctx)
		if err != nil {
			return s, nil, err
		}
		if ok {
			s.own = own
		} else if s.needWA {
			items = append(items, item("whatsapp", "WhatsApp is not paired", fmt.Sprintf("run '%s' (or '%s'), or choose the local channel or Telegram there", g.cmd("setup"), g.cmd("whatsapp login"))))
		}
	}
	if s.main == nil {
		items = append(items, item("main chat", "no main chat is chosen", fmt.Sprintf("run '%s', or '%s'", g.cmd("setup"), g.cmd("groups add --main --jid JID --name NAME --folder main"))))
	}
	s.credName, s.keyless = g.Cred.Set(), !CredentialNeeded(cfg, list)
	switch {
	case s.keyless:
	case s.credName == "":
		items = append(items, item("credential", "no model credential", fmt.Sprintf("set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from 'claude setup-token') in the environment or in %s, or run '%s'", g.Cred.EnvFile, g.cmd("setup"))))
	case !slices.Contains(cfg.Agent.Env, s.credName):
		items = append(items, item("credential", s.credName+" is set, but agents get only what agent.env lists", fmt.Sprintf("add %q to agent.env in %s, or run '%s'", s.credName, cfg.File, g.cmd("setup"))))
	}
	return s, items, nil
}

// NeedsWhatsApp tells whether a first answer waits for WhatsApp, given
// the registered groups gs: none is main yet (pairing is the first way to
// a main chat), or one is a WhatsApp chat. An unpaired WhatsApp nothing
// uses stands in no one's way; setup and doctor agree on it through this.
func NeedsWhatsApp(gs []groups.Group) bool {
	return !slices.ContainsFunc(gs, func(g groups.Group) bool { return g.IsMain }) || onWhatsApp(gs)
}

// onWhatsApp tells whether any of gs is a WhatsApp chat.
func onWhatsApp(gs []groups.Group) bool {
	return slices.ContainsFunc(gs, func(g groups.Group) bool { return Network(g.JID) == "whatsapp" })
}

// Network names the chat network a JID is on, as the config names its
// channel: "local", "telegram" or "whatsapp".
func Network(jid string) string {
	switch {
	case strings.HasPrefix(jid, local.Prefix):
		return "local"
	case strings.HasPrefix(jid, telegram.Prefix):
		return "telegram"
	}
	return "whatsapp"
}

// ChannelOn tells whether the channel of the chat jid is on in cfg; its
// key is channels.<Network(jid)>.enabled.
func ChannelOn(cfg *config.Config, jid string) bool {
	switch Network(jid) {
	case "local":
		return cfg.Channels.Local.Enabled
	case "telegram":
		return cfg.Channels.Telegram.Enabled
	}
	return cfg.Channels.WhatsApp.Enabled
}

// networkName is how the guide names a chat network in a sentence.
func networkName(jid string) string {
	switch Network(jid) {
	case "local":
		return "the local channel"
	case "telegram":
		return "Telegram"
	}
	return "WhatsApp"
}

// Missing lists what stands between this install and a first answer,
// without asking anything or using the network.
func (g *Guide) Missing(ctx context.Context) ([]Item, error) {
	_, items, err := g.look(ctx)
	return items, err
}

// Run walks through the steps in order, offering to do each one that is
// missing, and ends with the line to send for a first answer. daemonNext
// says the daemon starts right after (nanoclawd run).
func (g *Guide) Run(ctx context.Context, daemonNext bool) error {
	s, items, err := g.look(ctx)
	if err != nil {
		return err
	}
	cfg := g.Config
	if len(items) == 0 {
		fmt.Fprintln(g.Out, "Everything a first answer needs is in place:")
	} else {
		fmt.Fprintf(g.Out, "%d thing(s) stand between this install and a first answer:\n", len(items))
		for i, it := range items {
			fmt.Fprintf(g.Out, "  %d. %s: %s\n", i+1, it.Step, it.What)
		}
		fmt.Fprintln(g.Out, "Let's do them here (press Enter for the choice in brackets).")
	}

	// 1. WhatsApp.
	switch {
	case cfg.Channels.WhatsApp.Enabled && s.own == "" && !s.needWA:
		fmt.Fprintf(g.Out, "- WhatsApp: not paired, and not needed: the main chat is on %s (pair any time with '%s')\n", networkName(s.main.JID), g.cmd("whatsapp login"))
	case cfg.Channels.WhatsApp.Enabled:
		if s.own == "" {
			if s.own, err = g.pair(ctx); err != nil {
				return err
			}
		}
		if s.own != "" {
			fmt.Fprintf(g.Out, "✓ WhatsApp: paired as +%s\n", userOf(s.own))
		} else {
			fmt.Fprintln(g.Out, "✗ WhatsApp: not paired (skipped)")
		}
	default:
		fmt.Fprintln(g.Out, "- WhatsApp: disabled (channels.whatsapp.enabled is false)")
	}

	// 2. The main chat.
	if s.main == nil {
		if s.main, err = g.chooseMain(ctx, s.own, s.onWA); err != nil {
			return err
		}
	}
	if s.main != nil {
		fmt.Fprintf(g.Out, "✓ main chat: %s (%s), folder %s\n", s.main.Name, s.main.JID, s.main.Folder)
	} else {
		fmt.Fprintln(g.Out, "✗ main chat: none (skipped)")
	}

	// 3. The model credential.
	if s.credName == "" && s.keyless {
		fmt.Fprintln(g.Out, "- model credential: none needed (every group's provider has its own, or takes none)")
	} else if s.credName, s.noCred, err = g.credential(ctx, s.credName); err != nil {
		return err
	}

	// What to do for a first answer: the last line. A first answer that
	// cannot come is never offered: the guide says what is missing.
	if why := g.noAnswer(s); why != "" {
		fmt.Fprintf(g.Out, "\nNo first answer yet: %s.\n", why)
		return nil
	}
	fmt.Fprintln(g.Out)
	if g.Running > 0 {
		fmt.Fprintf(g.Out, "The daemon running now (PID %d) uses a key saved here from its next agent run on. Then:\n", g.Running)
	} else if !daemonNext {
		fmt.Fprintf(g.Out, "Start the daemon with 'make run' (or '%s'; as a service: '%s'). Then:\n", g.cmd("run"), g.cmd("service install"))
	}
	fmt.Fprintln(g.Out, g.firstAnswer(*s.main, s.own))
	return nil
}

// noAnswer says what still stands between this install and a first
// answer, with the one command that fixes it; "" when nothing does.
func (g *Guide) noAnswer(s state) string {
	switch {
	case s.main == nil:
		return fmt.Sprintf("no main chat is chosen: run '%s' again when you are ready", g.cmd("setup"))
	case !ChannelOn(g.Config, s.main.JID):
		return fmt.Sprintf("the main chat is on %s, which is off: set channels.%s.enabled to true in %s", networkName(s.main.JID), Network(s.main.JID), g.Config.File)
	case Network(s.main.JID) == "whatsapp" && s.own == "":
		return fmt.Sprintf("the main chat is on WhatsApp, which is not paired: run '%s'", g.cmd("whatsapp login"))
	}
	return s.noCred
}

// firstAnswer tells the owner what to send for a first answer in the main
// chat. For a local chat its last line is the command to run.
func (g *Guide) firstAnswer(main groups.Group, own string) string {
	hello := "hello " + g.Config.AssistantName
	if main.RequiresTrigger && !main.IsMain {
		hello = main.Trigger + " hello"
	}
	switch Network(main.JID) {
	case "local":
		return fmt.Sprintf("For a first answer, run this in a second terminal, then type: %s\n%s", hello, g.cmd("chat --chat "+main.JID))
	case "telegram":
		return fmt.Sprintf("For a first answer, send this in the Telegram chat %q: %s", main.Name, hello)
	}
	if own != "" && main.JID == own {
		return fmt.Sprintf("For a first answer, message yourself on WhatsApp (the chat with your own number, +%s): %s", userOf(own), hello)
	}
	return fmt.Sprintf("For a first answer, send this in the WhatsApp chat %q: %s", main.Name, hello)
}

func (g *Guide) pair(ctx context.Context) (string, error) {
	for {
		a, err := g.ask(ctx, "Pair WhatsApp now: [q]r code, [p]airing code by phone number, or [s]kip? [q] ")
		if err != nil {
			return "", err
		}
		var phone string
		switch strings.ToLower(a) {
		case "", "q", "qr":
		case "p":
			if phone, err = g.ask(ctx, "Your phone number, country code first (e.g. +49 170 1234567): "); err != nil {
				return "", err
			}
		case "s", "skip":
			return "", nil
		default:
			fmt.Fprintf(g.Out, "%q is not one of q, p, s\n", a)
			continue
		}
		own, err := g.Pairer.Pair(ctx, phone, g.Out)
		if err == nil {
			g.PairedNow = true
			return own, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		fmt.Fprintf(g.Out, "Pairing did not work: %v\nTry again, or [s]kip: the local channel can carry the main chat without WhatsApp.\n", err)
	}
}

// chooseMain asks which chat is main and registers it. A channel the
// owner did not choose is turned off: an unpaired WhatsApp that no
// registered chat (onWA) uses.
func (g *Guide) chooseMain(ctx context.Context, own string, onWA bool) (*groups.Group, error) {
	cfg := g.Config
	type option struct {
		label string
		group groups.Group
	}
	var opts []option
	if own != "" {
		opts = append(opts, option{fmt.Sprintf("your own WhatsApp chat, +%s (\"message yourself\")", userOf(own)),
			groups.Group{JID: own, Name: "Main (message yourself)"}})
	}
	// Without WhatsApp the local channel carries the main chat: a terminal
	// client on this machine. Choosing it turns the channel on.
	local := "a chat on the local channel, local:main: talk to it in a terminal on this machine"
	if !cfg.Channels.Local.Enabled {
		local += " (this turns the local channel on in " + cfg.File + ")"
	}
	opts = append(opts, option{local, groups.Group{JID: "local:main", Name: "Main (local)"}})
	// Telegram: the chat is known once the owner sent a code from it.
	opts = append(opts, option{"a Telegram chat: a bot from @BotFather, and a code sent to it from that chat", groups.Group{JID: "tg:"}})
	fmt.Fprintln(g.Out, "Which chat is the main chat? It is your admin channel: its agent is trusted, and sandbox alerts go there.")
	for i, o := range opts {
		fmt.Fprintf(g.Out, "  %d) %s\n", i+1, o.label)
	}
	fmt.Fprintln(g.Out, "  s) skip")
	for {
		a, err := g.ask(ctx, "Choice [1]: ")
		if err != nil {
			return nil, err
		}
		if a == "s" || a == "skip" {
			return nil, nil
		}
		n := 1
		if a != "" {
			if _, err := fmt.Sscanf(a, "%d", &n); err != nil || n < 1 || n > len(opts) {
				fmt.Fprintf(g.Out, "%q is not a number from 1 to %d, or s\n", a, len(opts))
				continue
			}
		}
		m := opts[n-1].group
		if m.JID == "tg:" {
			tm, err := g.telegramMain(ctx)
			if err != nil || tm == nil {
				return nil, err
			}
			m = *tm
		}
		if Network(m.JID) == "local" && !cfg.Channels.Local.Enabled {
			if err := g.enableLocal(); err != nil {
				return nil, err
			}
		}
		if Network(m.JID) != "whatsapp" && own == "" && !onWA && cfg.Channels.WhatsApp.Enabled {
			if err := g.disableWhatsApp(m.JID); err != nil {
				return nil, err
			}
		}
		m.Folder, m.Trigger, m.IsMain = "main", cfg.DefaultTrigger(), true
		if err := g.Groups.Add(ctx, m); err != nil {
			return nil, fmt.Errorf("register %s as the main chat: %w (do it with 'nanoclawd groups add --main')", m.JID, err)
		}
		if g.Changed != nil {
			g.Changed()
		}
		return &m, nil
	}
}

// enableLocal turns the local channel on in the config file and in the
// config this process runs with, so a daemon started next serves it.
func (g *Guide) enableLocal() error {
	cfg, err := config.Set(g.Config.File, "channels.local.enabled", true)
	if err != nil {
		return fmt.Errorf("turn the local channel on: %w", err)
	}
	*g.Config = *cfg // the file is what the daemon runs with (made from the template if it was missing)
	g.LocalOnNow = true
	fmt.Fprintf(g.Out, "✓ local channel: on in %s (socket %s)\n", g.Config.File, g.Config.Channels.Local.Socket)
	return nil
}

// disableWhatsApp turns the unpaired WhatsApp channel off in the config
// file when the main chat (mainJID) is elsewhere: a daemon would only
// warn about it at every start. 'whatsapp login' turns it on again.
func (g *Guide) disableWhatsApp(mainJID string) error {
	cfg, err := config.Set(g.Config.File, "channels.whatsapp.enabled", false)
	if err != nil {
		return fmt.Errorf("turn the WhatsApp channel off: %w", err)
	}
	*g.Config = *cfg
	fmt.Fprintf(g.Out, "✓ WhatsApp: off in %s, since the main chat is on %s ('%s' pairs it and turns it on)\n", g.Config.File, networkName(mainJID), g.cmd("whatsapp login"))
	return nil
}

// ask prints prompt and reads one line; the end of input is an error, so
// a closed stdin never loops, and ctx ending (Ctrl-C) stops the wait.
func (g *Guide) ask(ctx context.Context, prompt string) (string, error) {
	fmt.Fprint(g.Out, prompt)
	return g.read(ctx, func() (string, error) {
		line, err := g.In.ReadString('\n')
		if errors.Is(err, io.EOF) && line != "" {
			err = nil
		}
		return line, err
	})
}

func (g *Guide) read(ctx context.Context, f func() (string, error)) (string, error) {
	type result struct {
		s   string
		err error
	}
	ch := make(chan result, 1)
	go func() { s, err := f(); ch <- result{s, err} }()
	select {
	case <-ctx.Done():
		fmt.Fprintln(g.Out)
		return "", ctx.Err()
	case r := <-ch:
		if r.err != nil {
			return "", fmt.Errorf("setup needs answers on its input, and it ended (%v): run 'nanoclawd setup' on a terminal", r.err)
		}
		return strings.TrimSpace(r.s), nil
	}
}

func userOf(jid string) string {
	user, _, _ := strings.Cut(jid, "@")
	return user
}
