package e2e_test

// A confined agent fills the disk that holds data/ and groups/ (a 64 MiB
// tmpfs), where its folder's limit alone would not see it: in its session
// HOME, which stays after the run, and in a file it unlinked and holds
// open. Nothing accepted is lost: its own answer and main's are delivered,
// POST /messages still answers, the owner is told, and what the run wrote
// past its limit is gone afterwards.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// smallDisk mounts a tmpfs of 64 MiB for the test, or skips it.
func smallDisk(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	top := t.TempDir()
	dir := filepath.Join(top, "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The runs' user passes through to the install (e2e.New opens the
	// directory above it).
	if err := os.Chmod(filepath.Dir(top), 0o711); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func TestFullDiskLosesNothing(t *testing.T) {
	for _, where := range []string{"folder", "home", "unlinked"} {
		t.Run(where, func(t *testing.T) {
			dir := smallDisk(t)
			in := e2e.New(t, e2e.Options{
				Dir: dir,
				Agent: `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `], "env": ["HOSTILE_DISK"],
					"limits": {"diskMiB": 16}`,
				Env: []string{"HOSTILE_DISK=" + where + " 200"},
			})
			in.AddGroup("local:main", "main", "--main")
			in.AddGroup("local:family", "family", "--no-trigger")
			in.Start()

			in.Post("local:family", "Eve", "fill the disk")
			// The group's answer: its report, or that it could not be
			// answered once the run was stopped; either way not lost.
			in.WaitFor("local:family", func(s string) bool {
				return strings.Contains(s, "DISK "+where) || strings.Contains(s, "could not answer")
			})
			in.WaitFor("local:main", func(s string) bool {
				return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, `"family"`) && strings.Contains(s, "disk limit")
			})
			e2e.WaitNoProcs(t, e2e.Bin(t, "internal/testkit/hostileagent"), "the stopped run")

			// Main is answered, and a message posted now is taken (202) and answered.
			in.Post("local:main", "Owner", "hello")
			in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "SELF ") })
			in.Post("local:family", "Eve", "anyone there?")
			in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "SELF ") })

			all := in.AllSent()
			told := 0
			for _, m := range e2e.InChat(all, "local:main") {
				if strings.HasPrefix(m, "[DISK]") {
					told++
				}
			}
			if told > 1 {
				t.Errorf("the owner was told %d times that the disk is full, want once", told)
			}
			// Nothing the run wrote past its limit stays.
			l := in.Layout()
			var used int64
			for _, d := range []string{l.Group("family"), l.Session("family"), string(l.IPC("family"))} {
				used += sandbox.DiskUse(d, 1<<40)
			}
			if used > 16<<20 {
				t.Errorf("the group's directories hold %d MiB after the run was stopped, over its limit of 16", used>>20)
			}
			t.Logf("told %d time(s) that the disk is full", told)
		})
	}
}
