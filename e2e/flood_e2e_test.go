package e2e_test

// The flood: a group that writes tens of thousands of tiny IPC files with a
// bad token must not bury the owner in alerts, fill ipc/errors/, grow the
// database without bound or keep other groups from being answered.

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

var drainedRE = regexp.MustCompile(`^(\d+) files deleted unread`)

// floodFiles is the size of the flood in make test; NANOCLAWD_FLOOD_FILES
// asks for the full 100,000 of the attack it reproduces.
func floodFiles(t *testing.T) int {
	if s := os.Getenv("NANOCLAWD_FLOOD_FILES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("NANOCLAWD_FLOOD_FILES=%q: want a number of files", s)
		}
		return n
	}
	return 20000
}

func TestIPCFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20,000 IPC files")
	}
	n := floodFiles(t)
	// family's agent is the hostile agent, confined like any group's,
	// writing the flood from inside its sandbox; work's and main's answer.
	bin := e2e.Bin(t, "internal/testkit/hostileagent")
	script := filepath.Join(t.TempDir(), "agent.sh")
	body := "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in\n*unleash-the-flood*) printf '%s' \"$input\" | exec " + bin +
		" ;;\n*) printf '%s' \"$input\" | exec " + e2e.Testagent(t) + " ;;\nesac\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	// No cooldown: without the per-minute cap every refusal would be
	// its own alert.
	in := e2e.New(t, e2e.Options{
		Agent:    `"command": [` + e2e.Quote(script) + `], "timeout": "600s", "idleTimeout": "60s", "env": ["HOSTILE_FLOOD"]`,
		Alerts:   `"cooldown": "0s"`,
		Env:      []string{"HOSTILE_FLOOD=" + strconv.Itoa(n)},
		Security: `"allowRead": [` + e2e.Quote(bin) + `, ` + e2e.Quote(e2e.Testagent(t)) + `]`,
		// Writing the flood from inside the sandbox takes its time on a
		// loaded machine.
		Wait: 10 * time.Minute,
	})
	h := &ipcInstall{Install: in}
	h.threeGroups()
	h.Start()
	dir := h.ipcDir("family", "messages")
	h.Post("local:family", "Eve", "@Andy unleash-the-flood")
	// Other groups are answered while the flood is written and handled.
	h.Post("local:work", "Owner", "@Andy echo meanwhile")
	h.WaitFor("local:work", e2e.Equals("echo: meanwhile"))
	h.WaitFor("local:family", func(s string) bool { return strings.Contains(s, fmt.Sprintf("FLOOD %d of %d files: <nil>", n, n)) })

	deadline := time.Now().Add(10 * time.Minute)
	for pending(t, dir) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d flood files still unhandled after 10 minutes", pending(t, dir), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.Post("local:work", "Owner", "@Andy echo afterwards")
	h.WaitFor("local:work", e2e.Equals("echo: afterwards"))

	db, err := sql.Open("sqlite3", "file:"+h.Layout().DB()+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Every file is audited, whatever happened to it: one row each, or
	// one row per batch drained while the group was paused.
	rows, err := db.Query(`SELECT detail FROM violations WHERE grp = 'family'`)
	if err != nil {
		t.Fatal(err)
	}
	audited, drained := 0, 0
	for rows.Next() {
		var detail string
		if err := rows.Scan(&detail); err != nil {
			t.Fatal(err)
		}
		if m := drainedRE.FindStringSubmatch(detail); m != nil {
			k, _ := strconv.Atoi(m[1])
			audited, drained = audited+k, drained+k
		} else if strings.HasPrefix(detail, "wrong or expired token") {
			audited++
		}
	}
	rows.Close()
	if audited != n {
		t.Errorf("%d files audited, want %d", audited, n)
	}
	t.Logf("%d of them drained while the group was paused", drained)

	// At most 10 alert messages in any minute, the summary included.
	var alerts []e2e.Sent
	for _, m := range h.AllSent() {
		if m.ChatJID == "local:main" && strings.HasPrefix(m.Text, "[SANDBOX ALERT]") && strings.Contains(m.Text, "family") {
			alerts = append(alerts, m)
		}
		if strings.Contains(m.Text, "never-flooded") {
			t.Errorf("a flood file's text was sent: %+v", m)
		}
	}
	if len(alerts) == 0 {
		t.Error("the flood raised no alert")
	}
	for i := range alerts {
		in := 0
		for j := i; j < len(alerts) && alerts[j].At(t).Sub(alerts[i].At(t)) < time.Minute; j++ {
			in++
		}
		if in > 10 {
			t.Errorf("%d alert messages to main within a minute from %s", in, alerts[i].Time)
		}
	}

	entries, err := os.ReadDir(h.Layout().IPCErrors())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) > 1000 {
		t.Errorf("ipc/errors holds %d entries, want at most 1,000", len(entries))
	}
	for _, name := range []string{h.Layout().DB(), h.Layout().DB() + "-wal"} {
		if fi, err := os.Stat(name); err == nil && fi.Size() > 100<<20 {
			t.Errorf("%s is %d MiB, want under 100", filepath.Base(name), fi.Size()>>20)
		}
	}
	t.Logf("%d files: %d alert messages to main, %d entries in ipc/errors", n, len(alerts), len(entries))
}

// pending counts the *.json files still waiting in dir.
func pending(t *testing.T, dir string) int {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	c := 0
	for _, n := range names {
		if strings.HasSuffix(n, ".json") {
			c++
		}
	}
	return c
}
