package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
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
	dir := t.TempDir()
	// The clone, as far as this test needs it: what git tracks at the top,
	// the built binary, and a built agent runner, here a stand-in.
	gitignore, err := os.ReadFile(filepath.Join("..", "..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, ".gitignore"), string(gitignore))
	// The config a fresh clone has, as committed (the copy the binary
	// carries: the top-level file is the owner's, and no test reads it).
	writeTestFile(t, filepath.Join(dir, "nanoclaw.config.jsonc"), string(config.Template))
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(e2e.Nanoclawd(t), filepath.Join(dir, "bin", "nanoclawd")); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "agent-runner", "dist", "index.js"), fmt.Sprintf(
		"const r = require('node:child_process').spawnSync(%s, {stdio: 'inherit'});\nprocess.exit(r.status ?? 1);\n", e2e.Quote(e2e.Testagent(t))))
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

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
