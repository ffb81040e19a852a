package e2e_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// A confined run leaves nothing behind that runs as someone else, and
// cannot widen the kernel surface, attacked by a hostile program with no
// SDK in between and the daemon as root: it renames the owner's .git away
// and makes one whose core.fsmonitor writes a canary, makes nested
// repositories the same way, copies a shell and sets its setuid bit,
// tries nested user namespaces, writes to /dev and fills /dev/shm. Then
// the owner (root) runs git status in the folder and in each nested repo:
// the canary must not exist. The same hook in a repository the owner made
// does write it, so the probe works.
func TestConfinedRunLeavesNothingThatRunsAsSomeoneElse(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux: the kernel surface of a bubblewrap run (seccomp, user namespaces, /dev)")
	}
	if os.Geteuid() != 0 {
		t.Skip("runs are another user than the daemon's only when it runs as root (agent.runAs)")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	canary := filepath.Join(dir, "canary")
	hook := "touch " + canary + "; false"
	in := e2e.New(t, e2e.Options{
		Dir:   dir,
		Agent: `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `], "env": ["HOSTILE_ESCAPE"]`,
		Env:   []string{"HOSTILE_ESCAPE=" + hook},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	folder := filepath.Join(dir, "groups", "family")
	git := func(at string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", at}, args...)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git(folder, "init", "-q"); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	// The owner's hooks live in the worktree (husky and friends): git runs
	// what is in core.hooksPath on the owner's next commit.
	if out, err := git(folder, "config", "core.hooksPath", "tools/hooks"); err != nil {
		t.Fatalf("git config: %v %s", err, out)
	}
	for _, d := range []string{"tools/hooks", ".githooks", ".husky"} {
		os.MkdirAll(filepath.Join(folder, d), 0o755)
	}
	in.Start()
	in.Post("local:family", "Eve", "go")
	reply := in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "ESCAPE /dev/shm") })
	got := strings.Join(e2e.InChat(reply, "local:family"), "\n")
	t.Logf("what the confined agent tried:\n%s", got)
	for _, want := range []string{
		"ESCAPE rename .git: refused", "ESCAPE new .git: refused", "ESCAPE .git/commondir: refused",
		"ESCAPE chmod 4755 sh-copy: refused", "ESCAPE chmod 2755 sh-copy: refused", "ESCAPE create 4755 sh-made-setuid: refused",
		"ESCAPE unshare -Ur true: refused", "ESCAPE unshare(CLONE_NEWUSER): refused", "ESCAPE write /dev/escape: refused",
		"ESCAPE hook .githooks/pre-commit: refused", "ESCAPE hook .husky/pre-commit: refused", "ESCAPE hook tools/hooks/pre-commit: refused",
		"ESCAPE tiocsti|1<<32: refused", "ESCAPE personality: refused", "ESCAPE socket vsock: refused",
		"ESCAPE socket packet: refused", "ESCAPE socket netlink audit: refused", "ESCAPE shmget: refused",
		"Uid:\t" + strconv.Itoa(sandbox.DefaultRunID) + "\t",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the agent's report lacks %q", want)
		}
	}
	if !strings.Contains(got, "ESCAPE /dev/shm filled 64 MiB") && !strings.Contains(got, "ESCAPE /dev/shm filled 65 MiB") {
		t.Errorf("/dev/shm is not bounded to its 64 MiB")
	}

	// The owner's git, in the folder and in every repository the run made.
	for _, at := range []string{folder, filepath.Join(folder, "sub"), filepath.Join(folder, "deep", "er")} {
		out, err := git(at, "status")
		t.Logf("git status in %s: %v\n%s", at, err, out)
	}
	// Even an owner who trusts the folder (safe.directory) commits
	// without running anything the run wrote.
	out, err := git(folder, "-c", "safe.directory=*", "-c", "user.name=owner", "-c", "user.email=owner@example.com", "commit", "-q", "--allow-empty", "-m", "owner's commit")
	t.Logf("the owner's commit: %v\n%s", err, out)
	if _, err := os.Stat(canary); err == nil {
		t.Fatal("the owner's git ran a hook the confined run wrote")
	}
	if b, err := os.ReadFile(filepath.Join(folder, ".git", "config")); err != nil || strings.Contains(string(b), "fsmonitor") {
		t.Errorf("the owner's .git/config changed: %q %v", b, err)
	}
	// Nothing the run left is setuid, setgid or root's.
	filepath.WalkDir(folder, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s is %v after the run", p, fi.Mode())
		}
		if strings.HasPrefix(d.Name(), "sh-") && fi.Sys().(*syscall.Stat_t).Uid == 0 {
			t.Errorf("%s, made by the run, is root's on the host", p)
		}
		return nil
	})

	// The probe works: the same hook in a repository the owner made runs.
	ctl := filepath.Join(dir, "control")
	os.MkdirAll(ctl, 0o755)
	git(ctl, "init", "-q")
	git(ctl, "config", "core.fsmonitor", hook)
	git(ctl, "status")
	if _, err := os.Stat(canary); err != nil {
		t.Fatalf("the control repository's hook did not run, so the test proves nothing: %v", err)
	}
}

// security show names who a run is on the host, its seccomp policy and its
// limits; it and doctor flag an allowWrite path the run's user could not
// write.
func TestSecurityShowNamesTheRunUserAndItsKernelSurface(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux: the kernel surface of a bubblewrap run (seccomp, user namespaces, /dev)")
	}
	locked := filepath.Join(t.TempDir(), "owners-only")
	if err := os.MkdirAll(locked, 0o755); err != nil {
		t.Fatal(err)
	}
	in := e2e.New(t, e2e.Options{Security: `"allowWrite": [` + e2e.Quote(locked) + `]`})
	in.AddGroup("local:family", "family")
	want := sandbox.RunUser(sandbox.User{UID: sandbox.DefaultRunID, GID: sandbox.DefaultRunID})
	var shown struct {
		Confinement struct {
			RunAs    sandbox.User      `json:"runAs"`
			Seccomp  string            `json:"seccomp"`
			Limits   sandbox.Limits    `json:"limits"`
			Problems []sandbox.Problem `json:"problems"`
		} `json:"confinement"`
	}
	if err := json.Unmarshal([]byte(in.CLI("security", "show", "family", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	c := shown.Confinement
	if c.RunAs != want || c.Seccomp != sandbox.SeccompPolicy || c.Limits.ShmSize != 64<<20 || c.Limits.Memory != 4096<<20 {
		t.Errorf("security show --json confinement: %+v, want runAs %+v, seccomp %s and the limits", c, want, sandbox.SeccompPolicy)
	}
	text := in.CLI("security", "show", "family")
	for _, line := range []string{
		"run as: uid " + strconv.Itoa(want.UID) + " gid " + strconv.Itoa(want.GID),
		"seccomp filter " + sandbox.SeccompPolicy + ", no nested user namespaces, /dev read-only",
		"/dev/shm 64 MiB",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("security show lacks %q:\n%s", line, text)
		}
	}
	if !want.Switches() {
		return // runs are the daemon's own user: the owner's dir is theirs
	}
	if len(c.Problems) != 1 || c.Problems[0].Path != locked || !strings.Contains(c.Problems[0].Why, "chown -R") {
		t.Errorf("security show --json problems: %+v, want %s not writable", c.Problems, locked)
	}
	if !strings.Contains(text, "PROBLEM "+locked+": not writable by the runs' user") {
		t.Errorf("security show does not flag %s:\n%s", locked, text)
	}
	out, _, code := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config)
	// (doctor wraps its lines at 100 columns)
	if code == 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), "allowWrite "+locked+": not writable by the runs' user") {
		t.Errorf("doctor (exit %d) does not flag %s:\n%s", code, locked, out)
	}
}
