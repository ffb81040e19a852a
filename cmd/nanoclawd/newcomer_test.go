package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// TestNewcomerWithoutWhatsApp follows the README on a fresh clone, with no
// WhatsApp at hand: the guide ('bin/nanoclawd setup', or 'make run', which
// runs 'bin/nanoclawd run' on a terminal) skips pairing, takes the local
// channel it offers and ends with the command to chat; the daemon then
// answers on local:main. Nothing was edited by hand, nothing restarted, and
// git sees no change but the owner's config, which is theirs to edit; the
// state is all ignored.
func TestNewcomerWithoutWhatsApp(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the default agent command needs it")
	}
	for _, verb := range []string{"setup", "run"} {
		t.Run(verb, func(t *testing.T) { newcomer(t, verb) })
	}
}

func newcomer(t *testing.T, verb string) {
	dir := clone(t, string(config.Template))
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "clone")

	const key = "sk-ant-api03-newcomer"
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o700)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm", "ANTHROPIC_API_KEY=" + key, "ANTHROPIC_BASE_URL=" + fakeAPI(t, key).URL}

	guide := startProgram(t, "bin/nanoclawd "+verb, dir, env, "bin/nanoclawd", verb)
	guide.Expect("Pair WhatsApp now")
	guide.Type("s")
	guide.Expect("1) a chat on the local channel, local:main")
	guide.Expect("Choice [1]: ")
	guide.Type("")
	guide.Expect("✓ local channel: on in " + filepath.Join(dir, "nanoclaw.config.jsonc") + " (socket " + filepath.Join(dir, "data", "local.sock") + ")")
	guide.Expect("✓ model credential: ANTHROPIC_API_KEY from the environment, accepted by the API")
	guide.Expect("run this in a second terminal, then type: hello Andy\r\nbin/nanoclawd chat --chat local:main\r\n")
	if strings.Contains(guide.text(), "agent.env") {
		t.Errorf("the config made from the template already hands agents the key, yet the guide changed agent.env:\n%s", guide.text())
	}
	if verb == "setup" {
		if code := guide.Exit(); code != 0 {
			t.Fatalf("setup: exit %d", code)
		}
		if rest := guide.text()[guide.seen:]; rest != "" {
			t.Errorf("setup printed after the command to chat: %q", rest)
		}
		guide = startProgram(t, "bin/nanoclawd run", dir, env, "bin/nanoclawd", "run")
	}
	guide.Expect("nanoclawd running")
	chat := startProgram(t, "bin/nanoclawd chat", dir, env, "bin/nanoclawd", "chat", "--chat", "local:main")
	chat.Expect("type a message and press Enter")
	chat.Type("hello Andy")
	chat.Expect("Andy: echo: hello Andy")

	// The owner's config is theirs to change in place (the guide turned
	// the local channel on there); nothing else tracked may change.
	if st := git("status", "--porcelain"); st != "" && st != " M nanoclaw.config.jsonc\n" {
		t.Errorf("git status after following the README:\n%s", st)
	}
}

// clone is a fresh clone, as far as these tests need it: what git tracks
// at the top, the config (cfg, as committed: the copy the binary carries,
// since the top-level file is the owner's and no test reads it), the built
// binary, and a built agent runner, here a stand-in.
func clone(t *testing.T, cfg string) string {
	dir := t.TempDir()
	gitignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, ".gitignore"), string(gitignore))
	writeTestFile(t, filepath.Join(dir, "nanoclaw.config.jsonc"), cfg)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e2e.Nanoclawd(t), filepath.Join(dir, "bin", "nanoclawd")); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "agent-runner", "dist", "index.js"), fmt.Sprintf(
		"const r = require('node:child_process').spawnSync(%s, {stdio: 'inherit'});\nprocess.exit(r.status ?? 1);\n", e2e.Quote(e2e.Testagent(t))))
	return dir
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestNewcomerWithoutAKey is a fresh clone's 'bin/nanoclawd setup' with no
// model credential at hand, the main chat on the local channel or on
// Telegram (a mock Bot API), read line by line: the guide turns off the
// WhatsApp nobody chose, offers no first answer it knows cannot come and
// says instead what is missing and the one command that fixes it. doctor
// then finds nothing wrong with the channels the owner uses and, once a
// key is there, nothing with the credential; 'run' asks nothing about
// WhatsApp and logs nothing about it.
func TestNewcomerWithoutAKey(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the default agent command needs it")
	}
	const key = "sk-ant-api03-later"
	for _, main := range []string{"local", "telegram"} {
		t.Run(main, func(t *testing.T) {
			bot := mocktelegram.Start(t, "42:AAnewcomer-newcomer_newcomer-newcoX")
			dir := clone(t, strings.Replace(string(config.Template), `"apiURL": "https://api.telegram.org"`, `"apiURL": "`+bot.URL+`"`, 1))
			home := filepath.Join(dir, "home")
			os.Mkdir(home, 0o700)
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm", "ANTHROPIC_BASE_URL=" + fakeAPI(t, key).URL}

			guide := startProgram(t, "bin/nanoclawd setup", dir, env, "bin/nanoclawd", "setup")
			guide.Expect("Pair WhatsApp now")
			guide.Type("s")
			guide.Expect("Choice [1]: ")
			mainLine := "✓ main chat: Main (local) (local:main), folder main"
			if main == "local" {
				guide.Type("1")
			} else {
				guide.Type("2")
				guide.Expect("Bot token: ")
				guide.Type("42:AAnewcomer-newcomer_newcomer-newcoX")
				code := regexp.MustCompile(`nc-[a-z0-9]{8}`).FindString(guide.Expect("Waiting for it"))
				bot.Push(map[string]any{"message": bot.Message(mocktelegram.Group(-100555, "Owners"), mocktelegram.User(31337, "Olga"), code, nil)})
				mainLine = "✓ main chat: Owners (tg:-100555), folder main"
			}
			guide.Expect("Press Enter to skip: ")
			guide.Type("")
			if code := guide.Exit(); code != 0 {
				t.Fatalf("setup: exit %d", code)
			}
			text := strings.ReplaceAll(guide.text(), "\r\n", "\n")
			cfgFile := filepath.Join(dir, "nanoclaw.config.jsonc")
			for _, want := range []string{
				"✗ WhatsApp: not paired (skipped)\n",
				"✓ WhatsApp: off in " + cfgFile + ", since the main chat is on " + map[string]string{"local": "the local channel", "telegram": "Telegram"}[main] + " ('bin/nanoclawd whatsapp login' pairs it and turns it on)\n",
				mainLine + "\n",
				"✗ model credential: none (skipped)\n\nNo first answer yet: agents have no model credential, so they cannot answer: run 'bin/nanoclawd setup' and paste an API key or OAuth token.\n",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("setup lacks %q", want)
				}
			}
			// Every line after the credential step: nothing offers the
			// first answer that cannot come, nothing says to start the daemon.
			if _, rest, _ := strings.Cut(text, "✗ model credential: none (skipped)\n"); strings.TrimSpace(rest) != "No first answer yet: agents have no model credential, so they cannot answer: run 'bin/nanoclawd setup' and paste an API key or OAuth token." {
				t.Errorf("after the skipped credential setup said:\n%s", rest)
			}
			cfg, err := config.Load(cfgFile)
			if err != nil || cfg.Channels.WhatsApp.Enabled || cfg.Channels.Local.Enabled != (main == "local") || cfg.Channels.Telegram.Enabled != (main == "telegram") {
				t.Errorf("the channels in the config setup wrote: %+v, %v", cfg.Channels, err)
			}

			// doctor: the channels the owner uses are fine; the credential is
			// what is missing, and once it is there, nothing of theirs is.
			doctor := func(env []string) map[string]string {
				t.Helper()
				out, _, _ := e2e.Run(t, dir, env, "doctor")
				checks, name := map[string]string{}, ""
				for _, l := range strings.Split(out, "\n") {
					switch { // "ok   check: detail", wrapped: the lines after it are indented
					case strings.HasPrefix(l, " ") && name != "":
						checks[name] += " " + strings.TrimSpace(l)
					case len(l) > 5:
						name, _, _ = strings.Cut(l[5:], ":")
						checks[name] = l
					}
				}
				return checks
			}
			checks := doctor(env)
			for name, want := range map[string]string{
				"whatsapp":    "ok   whatsapp: disabled",
				"main group":  "ok   main group: main (",
				"credentials": "FIX  credentials: agent.env lists ANTHROPIC_API_KEY but it is not set",
				"telegram":    map[string]string{"local": "ok   telegram: disabled", "telegram": "ok   telegram: bot @" + mocktelegram.BotUsername}[main],
			} {
				if !strings.HasPrefix(checks[name], want) {
					t.Errorf("doctor's %s: %q, want %q…", name, checks[name], want)
				}
			}
			withKey := append(slices.Clip(env), "ANTHROPIC_API_KEY="+key)
			if c := doctor(withKey)["credentials"]; !strings.HasPrefix(c, "ok   credentials: ANTHROPIC_API_KEY is set") {
				t.Errorf("doctor's credentials with the key: %q", c)
			}

			// run: nothing to ask, nothing about WhatsApp.
			run := startProgram(t, "bin/nanoclawd run", dir, withKey, "bin/nanoclawd", "run")
			run.Expect("nanoclawd running")
			if strings.Contains(run.text(), "Pair WhatsApp") || strings.Contains(run.text(), "WhatsApp") {
				t.Errorf("run spoke of WhatsApp:\n%s", run.text())
			}
		})
	}
}
