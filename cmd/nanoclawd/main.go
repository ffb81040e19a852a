// Command nanoclawd runs a personal Claude assistant in WhatsApp and
// Telegram chats, with a sandbox policy per group. main only finds the verb, wires
// signals to a context and hands over to the command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/nanoclawd/nanoclawd/internal/sandbox/sandboxinit"
	"github.com/nanoclawd/nanoclawd/internal/selftest"
)

// commands is the whole CLI, in the order 'nanoclawd help' lists it: each
// verb, the type that runs it and what it does, in one line.
var commands = []struct {
	name    string // the verb as typed: one word, or a noun and a verb
	cmd     command
	summary string
}{
	{"run", runCommand{}, "the daemon (also what nanoclawd does without a verb)"},
	{"config check", configCheck{}, "validate the config file: one FILE:LINE:COL line per problem"},
	{"groups list", groupsList{}, "the registered groups"},
	{"groups add", groupsAdd{}, "register a chat as a group, with its own folder, session and policy"},
	{"groups remove", groupsRemove{}, "unregister a group (its folder on disk is kept)"},
	{"groups set-security", groupsSetSecurity{}, "set or clear a group's security override, validated like the config"},
	{"groups import", groupsImport{}, "import groups, tasks and sessions from NanoClaw: its SQLite database or registered_groups.json"},
	{"groups reset-session", groupsResetSession{}, "start the group's next run with a fresh agent session"},
	{"groups set-model", groupsSetModel{}, "set or clear a group's model (an unknown model is refused with the known ones)"},
	{"security show", securityShow{}, "a group's effective policy and the exact agent options and confinement it produces"},
	{"security test", securityTest{}, "prove the confinement on this machine: probes confined as a non-main run report each boundary"},
	{"violations", violations{}, "the audit trail of blocked actions"},
	{"usage", usageCommand{}, "model usage counted at the relay: requests, tokens and cost per group"},
	{"whatsapp login", whatsappLogin{}, "pair WhatsApp by QR code or pairing code, and register the main chat"},
	{"whatsapp logout", whatsappLogout{}, "unlink this device from WhatsApp and delete the session"},
	{"whatsapp groups", whatsappGroups{}, "the WhatsApp groups (JID, name) there are to register"},
	{"telegram chats", telegramChats{}, "the Telegram chats (tg: JID, title, type) the bot has seen, to register"},
	{"setup", setupCommand{}, "guided first run: pair WhatsApp, choose the main chat, check the model credential"},
	{"status", statusCommand{}, "what the running daemon is doing: channels, agents, outbox, next tasks, violations"},
	{"service install", serviceInstall{}, "run nanoclawd as a LaunchAgent (macOS) or systemd user unit (Linux)"},
	{"service uninstall", serviceUninstall{}, "stop the service and remove its file"},
	{"service status", serviceStatus{}, "whether the service is installed and running"},
	{"console", consoleCommand{}, "a one-time login URL of the running daemon's console (and a browser opened on it, on a desktop)"},
	{"backup", backupCommand{}, "one archive of everything an install needs (databases, groups, sessions, config, env), while the daemon runs"},
	{"restore", restoreCommand{}, "put an archive back into this config's paths (the daemon stopped)"},
	{"doctor", doctorCommand{}, "check everything a run needs and say how to fix what is missing"},
	{"chat", chatCommand{}, "talk to the daemon in a chat of the local channel"},
	{"mcp", mcpCommand{}, "stdio MCP server with the nanoclaw tools (started by the agent runner, not by people)"},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-init" {
		// The first process inside an agent's sandbox, started by the
		// daemon: it handles its own signals and exits with the agent's status.
		os.Exit(sandboxinit.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "sandbox-probe" {
		// The attacker `security test` starts inside a confined run.
		os.Exit(selftest.Probe(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		var ec exitCode
		if errors.As(err, &ec) {
			if ec.err != nil {
				fmt.Fprintln(os.Stderr, "nanoclawd:", ec.err)
			}
			os.Exit(ec.code)
		}
		if !errors.Is(err, errPrinted) {
			fmt.Fprintln(os.Stderr, "nanoclawd:", err)
		}
		os.Exit(1)
	}
}

// Main runs the command line args (without the program name).
func Main(ctx context.Context, args []string) error {
	g, rest, err := parseGlobals(args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		rest = []string{"run"}
	}
	if isHelp(rest[0]) {
		if len(rest) == 1 {
			g.help("")
			return nil
		}
		rest = append(rest[1:], "--help") // help VERB: the verb's own help
	}
	for _, c := range commands {
		words := strings.Fields(c.name)
		if len(rest) >= len(words) && slices.Equal(rest[:len(words)], words) {
			g.verb = c.name
			err := c.cmd.Run(ctx, g, rest[len(words):])
			if errors.Is(err, flag.ErrHelp) {
				return nil // the help asked for is printed
			}
			return err
		}
	}
	if verbs := verbsOf(rest[0]); len(verbs) > 0 {
		if len(rest) > 1 && isHelp(rest[1]) {
			g.help(rest[0] + " ")
			return nil
		}
		what := fmt.Sprintf("unknown command %q", joinFirst(rest))
		if len(rest) == 1 {
			what = rest[0] + " needs a verb"
		}
		return fmt.Errorf("%s: nanoclawd %s takes one of %s (see 'nanoclawd %s --help')", what, rest[0], strings.Join(verbs, ", "), rest[0])
	}
	return fmt.Errorf("unknown command %q: run 'nanoclawd help' for the list", rest[0])
}

func isHelp(arg string) bool { return arg == "help" || arg == "-h" || arg == "--help" }

func joinFirst(rest []string) string {
	if len(rest) > 1 && !isFlag(rest[1]) {
		return rest[0] + " " + rest[1]
	}
	return rest[0]
}
