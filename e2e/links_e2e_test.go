package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

// The daemon is nobody's deputy, attacked through the real daemon by a
// confined hostile agent with no SDK in between: during its run it
// replaces results/, input/ and tasks/ of its IPC directory and the HOME
// in its session directory with links to a host directory (the canary,
// whose files are an hour old, as pruning wants them), then asks for a
// message, so the daemon writes its verdict. The daemon answers, watches,
// clears input/ and prepares the next run as always; the canary must come
// through untouched, each link be removed and recorded once as a blocked
// filesystem violation (alerted to main), and the group keep working.
func TestHostileAgentLinksAreNotFollowed(t *testing.T) {
	c := groupfstest.NewCanary(t)
	dir := t.TempDir()
	ipc := filepath.Join(dir, "data", "ipc", "family")
	links := []string{
		filepath.Join(ipc, "results"),
		filepath.Join(ipc, "input"),
		filepath.Join(ipc, "tasks"),
		filepath.Join(dir, "data", "sessions", "family", "home"),
	}
	var plant []string
	for _, l := range links {
		plant = append(plant, l+" "+c.Dir)
	}
	in := e2e.New(t, e2e.Options{
		Dir: dir,
		Agent: `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `], "timeout": "60s",
			"env": ["HOSTILE_LINK"]`,
		Env: []string{"HOSTILE_LINK=" + strings.Join(plant, "\n")},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()

	in.Post("local:family", "Eve", "plant links")
	all := in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "LINK ") })
	got := strings.Join(e2e.InChat(all, "local:family"), "\n")
	for _, l := range links {
		if !strings.Contains(got, "LINK "+l+": ok") {
			t.Fatalf("the agent could not plant %s, so the test proves nothing:\n%.3000s", l, got)
		}
	}
	if !strings.Contains(got, "REQUEST: <nil>") {
		t.Fatalf("the agent could not write its request:\n%.3000s", got)
	}
	// Its request is carried out (the verdict goes where results/ was).
	in.WaitFor("local:family", e2e.Equals("linked"))
	// The group still works: the next run clears input/ and makes HOME.
	in.Post("local:family", "Eve", "hello again")
	in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "ENV ") && !strings.Contains(s, "LINK ") })

	c.Intact(t)
	for _, l := range links[1:] {
		groupfstest.IsRealDir(t, l)
	}
	if fi, err := os.Lstat(links[0]); err == nil && !fi.IsDir() {
		t.Errorf("results/ is still a %v", fi.Mode())
	}
	h := &ipcInstall{Install: in}
	rows := h.violations("family")
	for _, l := range links {
		n := 0
		for _, r := range rows {
			if r.Target == l {
				n++
				if r.Kind != "filesystem" || r.Tool != groupfs.Tool || r.Action != "blocked" {
					t.Errorf("the link at %s is recorded as %+v; want a blocked filesystem violation of nanoclawd's", l, r)
				}
			}
		}
		if n != 1 {
			t.Errorf("the link at %s is recorded %d times, want once; violations: %+v", l, n, rows)
		}
	}
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT] blocked: ") && strings.Contains(s, `group "family" put a link at`) &&
			strings.Contains(s, links[2])
	})
}
