package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// `backup` without --to, run from a git checkout that holds the install,
// writes under the data dir (private), never into the working directory:
// the checkout stays clean.
func TestBackupDefaultLeavesCheckoutClean(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.email=t@t", "-c", "user.name=t"}, args...)...)
		cmd.Dir = in.Dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// As the repository's own .gitignore: the owner's config and state.
	os.WriteFile(filepath.Join(in.Dir, ".gitignore"), []byte("/data/\n/groups/\n/nanoclaw.config.jsonc\n/nanoclawd.env\n"), 0o644)
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "checkout")
	out, errs, code := e2e.Run(t, in.Dir, in.Env, "backup", "--config", in.Config)
	if code != 0 {
		t.Fatalf("backup: %s", errs)
	}
	archive := strings.TrimSpace(out)
	if want := filepath.Join(in.Dir, "data", "backups") + "/"; !strings.HasPrefix(archive, want) {
		t.Errorf("archive at %s, want it under %s", archive, want)
	}
	if fi, err := os.Stat(filepath.Dir(archive)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the backups directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	if st := git("status", "--porcelain"); st != "" {
		t.Errorf("backup left the checkout unclean:\n%s", st)
	}
}

// A restore into another directory rewrites nothing of the restored
// config, but names each of its lines whose path does not exist there.
func TestRestoreWarnsOfMissingPaths(t *testing.T) {
	// Made elsewhere: its agent and groups are at paths this machine lacks
	// once the old groups directory is gone.
	oldGroups := filepath.Join(t.TempDir(), "old-groups")
	old := e2e.New(t, e2e.Options{
		Agent: `"command": ["/gone/bin/node", "/gone/agent-runner/dist/index.js"]`,
		Top:   `"groupsDir": ` + e2e.Quote(oldGroups),
	})
	old.AddGroup("local:main", "main", "--main")
	archive := strings.TrimSpace(old.CLI("backup", "--to", t.TempDir()))
	os.RemoveAll(oldGroups)

	fresh := e2e.New(t, e2e.Options{})
	own, _ := os.ReadFile(fresh.Config)
	_, errs, code := e2e.Run(t, "", fresh.Env, "restore", archive, "--config", fresh.Config)
	if code != 0 {
		t.Fatalf("restore: %s", errs)
	}
	if now, _ := os.ReadFile(fresh.Config); !bytes.Equal(now, own) {
		t.Error("restore rewrote the install's config")
	}
	restored := fresh.Config + ".restored"
	for _, want := range []string{
		restored + ":", "agent.command[0]: /gone/bin/node does not exist here",
		"agent.command[1]: /gone/agent-runner/dist/index.js does not exist here",
		"groupsDir: " + oldGroups + " does not exist here",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("restore's warnings lack %q:\n%s", want, errs)
		}
	}
	// Each warning names the line to fix: the line holds the key.
	src, _ := os.ReadFile(restored)
	lines := strings.Split(string(src), "\n")
	for _, l := range strings.Split(errs, "\n") {
		if !strings.Contains(l, "restore: warning: "+restored+":") {
			continue
		}
		var n int
		var key string
		rest := strings.TrimPrefix(l, "restore: warning: "+restored+":")
		if _, err := fmt.Sscanf(rest, "%d: %s", &n, &key); err != nil || n < 1 || n > len(lines) {
			t.Errorf("no line number in %q", l)
			continue
		}
		key = strings.TrimSuffix(key, ":")
		name := key[strings.LastIndex(key, ".")+1:]
		if i := strings.Index(name, "["); i >= 0 {
			name = name[:i]
		}
		if !strings.Contains(lines[n-1], `"`+name+`"`) {
			t.Errorf("%q names line %d, which is %q", l, n, lines[n-1])
		}
	}
}
