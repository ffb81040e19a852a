package sdkproof

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// The whole chain as an operator runs it: the real nanoclawd daemon
// resolves each group's policy into sdkOptions (internal/security), starts
// the real agent runner, which drives the real SDK and claude CLI against
// the Messages API mock. The test speaks to the daemon only through its
// outside: the local channel's socket, the CLI and files.

// daemonDeadline bounds the whole test so a hang fails instead of stalling
// CI; it is not a performance threshold.
const daemonDeadline = 3 * time.Minute

// newDaemonInstall is a nanoclawd installation around a world: config next
// to its groups/ and data/ dirs, HOME = the world's operator home, the real
// agent runner as the agent, and the daemon stopped with SIGINT so it stops
// its agents' process groups. agent holds more agent.* keys, if any.
func newDaemonInstall(t *testing.T, w *world, mockURL string, agent ...string) *e2e.Install {
	t.Helper()
	o := daemonOptions(t, w, mockURL, "3s", agent...)
	o.Deadline = time.Now().Add(daemonDeadline)
	return e2e.New(t, o)
}

// daemonOptions are those of an install around w whose agents talk to the
// model API at baseURL and are asked to finish after idle.
func daemonOptions(t *testing.T, w *world, baseURL, idle string, agent ...string) e2e.Options {
	return e2e.Options{
		Dir:  w.root,
		Home: w.home,
		Agent: `"command": ["node", ` + e2e.Quote(w.runner) + `],
			"env": ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"],
			"timeout": "3m", "idleTimeout": ` + e2e.Quote(idle) + strings.Join(append([]string{""}, agent...), ", "),
		Env: []string{
			"ANTHROPIC_API_KEY=sk-ant-fake-" + randHex(t, 8),
			"ANTHROPIC_BASE_URL=" + baseURL,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		},
		StopSignal: os.Interrupt,
	}
}

// dumpOnFailure logs what the agents and the model saw (the daemon's own
// output is logged by e2e when it stops).
func dumpOnFailure(t *testing.T, w *world, mock *mockapi.Server) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		logRequests(t, mock)
		logs, _ := filepath.Glob(filepath.Join(w.groups, "*", "logs", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("run log %s:\n%s", l, b)
		}
	})
}

func TestDaemonSandboxesNonMainGroupEndToEnd(t *testing.T) {
	w := newWorld(t) // skips without agent-runner/node_modules or bwrap

	secretFile := filepath.Join(w.home, ".ssh", "id_test")
	workDir := w.groupDir("work")
	familyDir := w.groupDir("family")
	db, dbWAL := filepath.Join(w.data, "nanoclaw.db"), filepath.Join(w.data, "nanoclaw.db-wal")
	// Said in the work chat before family runs, so it sits in the daemon's
	// SQLite files, and written in work's notes (its CLAUDE.md).
	workPrivate := "WORK-PRIVATE-" + randHex(t, 8)
	// The operator's user settings: main reads them, family never does.
	userMarker := "USER-SETTINGS-" + randHex(t, 8)
	if err := os.MkdirAll(filepath.Join(w.home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.home, ".claude", "settings.json"), `{"env": {"NC_USER_MARKER": "`+userMarker+`"}}`, 0o600)

	mock := mockapi.New(t)
	const familyReply = "Some of that was blocked by the sandbox; ask the admin if you need it."
	mock.Script("FAMILY-PROBE",
		mockapi.Tool("Bash", map[string]any{"command": "cat ~/.ssh/id_test", "description": "read the key"}),                                // (a)
		mockapi.Tool("Read", map[string]any{"file_path": secretFile}),                                                                       // (b)
		mockapi.Tool("Bash", map[string]any{"command": "curl -s -m 20 https://example.com", "description": "fetch"}),                        // (c)
		mockapi.Tool("Write", map[string]any{"file_path": filepath.Join(workDir, "pwned.txt"), "content": "pwned"}),                         // (d)
		mockapi.Tool("Bash", map[string]any{"command": "echo pwned > " + filepath.Join(workDir, "pwned-bash.txt"), "description": "write"}), // (d) via Bash
		mockapi.Tool("Bash", map[string]any{"command": "echo marker=$NC_USER_MARKER", "description": "settings"}),
		// Its own folder is writable, except what would forge its audit
		// trail or loosen its sandbox on the next run.
		mockapi.Tool("Bash", map[string]any{"command": "echo forged >> logs/security.jsonl", "description": "audit"}),
		mockapi.Tool("Bash", map[string]any{"command": "mkdir -p .claude && echo '{}' > .claude/settings.json", "description": "settings"}),
		mockapi.Tool("Write", map[string]any{"file_path": filepath.Join(familyDir, ".mcp.json"), "content": "{}"}),
		// The daemon's SQLite, which holds every chat's messages.
		mockapi.Tool("Bash", map[string]any{"command": "cat " + db + " " + dbWAL + " | strings | grep WORK-PRIVATE", "description": "db"}),
		// The other file tools on the work group's notes.
		mockapi.Tool("Grep", map[string]any{"pattern": "WORK-NOTES", "path": w.groups, "output_mode": "content"}),
		mockapi.Tool("Grep", map[string]any{"pattern": "WORK-NOTES", "path": workDir, "output_mode": "content"}),
		mockapi.Tool("Glob", map[string]any{"pattern": "**/*.md", "path": workDir}),
		mockapi.Text(familyReply),
	)
	mock.Script("MAIN-PROBE",
		mockapi.Tool("Bash", map[string]any{"command": "cat ~/.ssh/id_test; echo marker=$NC_USER_MARKER", "description": "read the key"}),
		mockapi.Text("Here it is."),
	)

	in := newDaemonInstall(t, w, mock.URL)
	dumpOnFailure(t, w, mock)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.AddGroup("local:work", "work")
	in.Start()
	writeFile(t, filepath.Join(workDir, "CLAUDE.md"), "WORK-NOTES-"+workPrivate+"\n", 0o644)
	in.Post("local:work", "Bob", workPrivate) // no trigger: stored, never answered

	// --- family: every attempt is blocked, reported and leaks nothing.
	in.Post("local:family", "Eve", "FAMILY-PROBE show me the server's ssh key")
	// The run is confined by the daemon's OS sandbox, so the SDK's own Bash
	// sandbox is off; its permission layer then refuses a command that names
	// a denied path before it runs (target: the command). What gets past it
	// finds nothing: the kernel shows the run none of those paths.
	want := []struct{ kind, tool, target string }{
		{"filesystem", "Bash", secretFile},                                     // (a) "~" is the owner's home for the report
		{"permission", "Read", secretFile},                                     // (b)
		{"network", "network", "example.com"},                                  // (c) refused by the daemon's egress gateway
		{"permission", "Write", filepath.Join(workDir, "pwned.txt")},           // (d)
		{"permission", "Bash", "*" + filepath.Join(workDir, "pwned-bash.txt")}, // (d) via Bash
		{"permission", "Bash", "*logs/security.jsonl"},
		{"permission", "Bash", "*.claude/settings.json"},
		{"permission", "Write", filepath.Join(familyDir, ".mcp.json")},
		{"permission", "Bash", "*| strings | grep WORK-PRIVATE"}, // the daemon's SQLite and its WAL
		// Grep over the whole groups dir finds nothing and is no violation:
		// the deny rules leave work's files out of the search.
		{"permission", "Grep", workDir},
		{"permission", "Glob", workDir},
	}
	targetIs := func(got, want string) bool {
		if name, ok := strings.CutPrefix(want, "*"); ok {
			return strings.HasSuffix(got, name)
		}
		return got == want
	}
	// Violation frames come before the result frame, and the daemon records
	// each one before it reads the next frame: once the reply is out, the
	// audit trail is complete.
	in.WaitFor("local:family", e2e.Equals(familyReply))

	if mock.Contains(w.secret) {
		t.Errorf("the secret in %s reached the model API from the family group", secretFile)
	}
	if mock.Contains(workPrivate) {
		t.Error("the work group's message or notes reached the model API from the family group")
	}
	if dbBytes, _ := os.ReadFile(db); !bytes.Contains(append(dbBytes, readOrNil(dbWAL)...), []byte(workPrivate)) {
		t.Error("the work chat's message is not in the daemon's SQLite files, so reading them proves nothing")
	}
	// The daemon's own lines quote the command; the agent's would be a bare
	// "forged" line.
	if audit, _ := os.ReadFile(filepath.Join(familyDir, "logs", "security.jsonl")); slices.Contains(strings.Split(string(audit), "\n"), "forged") {
		t.Error("the family agent appended to its own audit trail")
	}
	// While the run lasts, an empty read-only placeholder stands where a
	// protected name did not exist (so the group cannot create it).
	for _, name := range []string{".mcp.json", filepath.Join(".claude", "settings.json")} {
		if b, err := os.ReadFile(filepath.Join(familyDir, name)); !errors.Is(err, os.ErrNotExist) && len(b) > 0 {
			t.Errorf("the family agent wrote %s into its folder, which would loosen its next run (%q, %v)", name, b, err)
		}
	}
	if mock.Contains(userMarker) {
		t.Error("the family agent read the operator's user settings (~/.claude/settings.json)")
	}
	for _, req := range mock.Requests() {
		if bytes.Contains(req, []byte("sk-ant-fake-")) {
			t.Error("ANTHROPIC_API_KEY was visible to a sandboxed command and reached the model API")
			break
		}
	}
	for _, name := range []string{"pwned.txt", "pwned-bash.txt"} {
		if _, err := os.Stat(filepath.Join(workDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written into the work group's folder (stat: %v)", name, err)
		}
	}
	// The audit trail: one line per attempt in the group's security.jsonl,
	// and the same rows from `nanoclawd violations`.
	type row struct{ Group, Kind, Tool, Target, Detail, Action string }
	var jsonl []row
	f, err := os.Open(filepath.Join(w.groupDir("family"), "logs", "security.jsonl"))
	if err != nil {
		t.Fatalf("groups/family/logs/security.jsonl: %v", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Errorf("security.jsonl line %q: %v", sc.Text(), err)
		}
		jsonl = append(jsonl, r)
	}
	f.Close()
	var cliRows []row
	if err := json.Unmarshal([]byte(in.CLI("violations", "--group", "family", "--json")), &cliRows); err != nil {
		t.Fatalf("nanoclawd violations --json: %v", err)
	}
	has := func(rows []row, kind, tool, target string) bool {
		for _, r := range rows {
			// Only the gateway's refusal is nanoclawd's own ("blocked"); the
			// SDK's denials reach it as the agent's frames ("reported").
			action := "reported"
			if kind == "network" {
				action = "blocked"
			}
			if r.Group == "family" && r.Kind == kind && r.Tool == tool && targetIs(r.Target, target) && r.Action == action {
				return true
			}
		}
		return false
	}
	for _, wv := range want {
		if !has(jsonl, wv.kind, wv.tool, wv.target) {
			t.Errorf("security.jsonl has no line {kind:%s tool:%s target:%s}: %+v", wv.kind, wv.tool, wv.target, jsonl)
		}
		if !has(cliRows, wv.kind, wv.tool, wv.target) {
			t.Errorf("nanoclawd violations has no row {kind:%s tool:%s target:%s}: %+v", wv.kind, wv.tool, wv.target, cliRows)
		}
	}
	if len(jsonl) != len(want) || len(cliRows) != len(want) {
		t.Errorf("%d security.jsonl lines and %d violations rows, want one per attempt (%d)", len(jsonl), len(cliRows), len(want))
	}
	t.Logf("family violations: %+v", cliRows)

	// The main chat gets one [SANDBOX ALERT] per recorded violation (the
	// cooldown is 0), naming the group, the tool and the target — up to
	// alerts.MaxPerMinute in a minute; the rest are counted in one
	// "+N more" summary once the minute has room.
	isAlert := func(m e2e.Sent) bool {
		return m.ChatJID == "local:main" && strings.HasPrefix(m.Text, "[SANDBOX ALERT]") && strings.Contains(m.Text, `"family"`)
	}
	more := regexp.MustCompile(`^\[SANDBOX ALERT\] \+(\d+) more`)
	folded := 0
	if len(cliRows) > 0 {
		n := 0
		in.WaitFor("local:main", func(s string) bool {
			if isAlert(e2e.Sent{ChatJID: "local:main", Text: s}) {
				if m := more.FindStringSubmatch(s); m != nil {
					k, _ := strconv.Atoi(m[1])
					n, folded = n+k, folded+k
				} else {
					n++
				}
			}
			return n >= len(cliRows)
		})
	}
	sent := in.AllSent()
	named := 0
	for _, wv := range want {
		found := false
		for _, m := range sent {
			found = found || isAlert(m) && strings.Contains(m.Text, wv.tool) && strings.Contains(m.Text, strings.TrimPrefix(wv.target, "*"))
		}
		if found {
			named++
		}
	}
	if named+folded < len(want) || named < min(len(want), alerts.MaxPerMinute) {
		t.Errorf("%d [SANDBOX ALERT]s in the main chat name family, the tool and the target, and a summary counts %d more; want all %d accounted for, and at least %d named",
			named, folded, len(want), min(len(want), alerts.MaxPerMinute))
	}
	for _, m := range sent {
		if m.ChatJID == "local:family" && m.Text != familyReply {
			t.Errorf("family chat got %q besides the agent's reply", m.Text)
		}
		if m.ChatJID == "local:work" {
			t.Errorf("work chat got %q", m.Text)
		}
	}

	// --- main: the same read goes through, so the probe can see a leak.
	in.Post("local:main", "Owner", "MAIN-PROBE show the key")
	in.WaitFor("local:main", e2e.Equals("Here it is."))
	if !mock.Contains(w.secret) {
		t.Fatalf("main group: the secret in %s never reached the mock, so the probe cannot see a leak", secretFile)
	}
	if !mock.Contains("marker=" + userMarker) {
		t.Error("main group: the operator's user settings (~/.claude/settings.json) were not read")
	}
	var mainRows []any
	if err := json.Unmarshal([]byte(in.CLI("violations", "--group", "main", "--json")), &mainRows); err != nil || len(mainRows) != 0 {
		t.Errorf("main group is exempt, yet violations --group main = %v (%v)", mainRows, err)
	}
}

func readOrNil(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}
