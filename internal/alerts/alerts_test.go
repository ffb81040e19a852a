package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
	"github.com/nanoclawd/nanoclawd/internal/testkit/outboxtest"
)

const (
	mainJID    = "120363000000000001@g.us"
	mainFolder = "main"
	deadline   = 10 * time.Second
)

type env struct {
	db        *store.DB
	dbPath    string
	groupsDir string
	out       *outbox.Outbox
	rep       *Reporter
	rec       *outboxtest.Recorder
	mainOK    atomic.Bool
}

// newEnv builds an outbox and reporter over a fresh database in dir (or a
// new temp dir) and, when run, starts both until the test ends.
func newEnv(t testing.TB, dir string, cooldown time.Duration, clock func() time.Time, run bool) *env {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	db, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{db: db, dbPath: layout.New(filepath.Join(dir, "data"), "").DB(), groupsDir: filepath.Join(dir, "groups"), rec: outboxtest.NewRecorder()}
	e.mainOK.Store(true)
	main := &mock.MainChat{MainChatFn: func(context.Context) (string, string, bool) {
		return mainFolder, mainJID, e.mainOK.Load()
	}}
	e.out = outbox.New(db, e.rec, nil, zerolog.Nop())
	e.out.MinBackoff, e.out.MaxBackoff = time.Millisecond, 5*time.Millisecond
	e.rep = NewReporter(db, e.groupsDir, e.out, main, cooldown, clock, zerolog.Nop())
	if run {
		e.start(t)
	}
	return e
}

func (e *env) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); e.out.Run(ctx) }()
	go func() { defer wg.Done(); e.rep.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func (e *env) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func netViolation(group, target string) security.Violation {
	return security.Violation{Group: group, Kind: security.KindNetwork, Tool: "Bash", Target: target, Detail: "deny network-outbound " + target}
}

func TestAlertReachesMainChatAndAuditLog(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, true)
	if err := e.rep.Report(context.Background(), netViolation("family", "example.com:443")); err != nil {
		t.Fatal(err)
	}
	m := e.rec.Next(t)
	if m.ChatJID != mainJID {
		t.Errorf("alert went to %q, want the main chat %q", m.ChatJID, mainJID)
	}
	for _, want := range []string{"family", "Bash", "example.com:443", "hostSecurity.network.allowedDomains",
		"nanoclawd groups set-security family", `{"network":{"allowedDomains":[…]}}`} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("alert lacks %q:\n%s", want, m.Text)
		}
	}
	// The hint names the key, never the value the agent chose.
	if lines := strings.Split(m.Text, "\n"); strings.Contains(lines[len(lines)-1], "example.com") {
		t.Errorf("the fix hint repeats the agent's target:\n%s", m.Text)
	}
	if !strings.HasPrefix(m.Text, "[SANDBOX ALERT] ") {
		t.Errorf("alert does not start with the marker:\n%s", m.Text)
	}
	if m.ID == "" {
		t.Error("alert has no idempotency ID")
	}

	path := filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, st.Mode().Perm())
	}
	lines := readLines(t, path)
	if len(lines) != 1 {
		t.Fatalf("security.jsonl has %d lines, want 1", len(lines))
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"time", "group", "kind", "tool", "target", "detail", "action"} {
		if _, ok := got[k]; !ok {
			t.Errorf("audit line lacks %q: %s", k, lines[0])
		}
	}
	if got["action"] != "blocked" || got["group"] != "family" || got["target"] != "example.com:443" {
		t.Errorf("audit line = %s", lines[0])
	}
	vs, err := List(context.Background(), e.db, Filter{})
	if err != nil || len(vs) != 1 || vs[0].Target != "example.com:443" {
		t.Fatalf("List = %v, %v", vs, err)
	}
}

func TestHintsPerKind(t *testing.T) {
	cases := []struct {
		v    security.Violation
		want []string
	}{
		{security.Violation{Group: "g", Kind: security.KindFilesystem, Tool: "Read", Target: "/home/o/.ssh/id_rsa"}, []string{"hostSecurity.denyRead"}},
		{security.Violation{Group: "g", Kind: security.KindFilesystem, Tool: "Write", Target: "/srv/x"}, []string{"hostSecurity.allowWrite", `{"allowWrite":[…]}`}},
		{security.Violation{Group: "g", Kind: security.KindFilesystem, Tool: "Bash", Target: "/srv/x"}, []string{"Refused by a deny rule", "denyRead"}},
		{security.Violation{Group: "g", Kind: security.KindTool, Tool: "WebFetch", Target: "https://x"}, []string{"Refused by hostSecurity.tools", "set-security g"}},
		{security.Violation{Group: "g", Kind: security.KindPermission, Tool: "Read", Target: "/x", Rule: "hostSecurity.denyRead"}, []string{"Refused by a deny rule"}},
		{security.Violation{Group: "g", Kind: security.KindNetwork, Tool: "network", Target: "x.test", Rule: "hostSecurity.network.deniedDomains"}, []string{"Refused by hostSecurity.network.deniedDomains"}},
		{security.Violation{Group: "g", Kind: security.KindLimit, Tool: "sandbox", Target: "memory", Rule: "agent.limits"}, []string{"memory limit", "agent.limits"}},
		{security.Violation{Group: "g", Kind: security.KindIPC, Tool: "ipc", Target: "other"}, []string{"No configuration change allows this"}},
	}
	for _, c := range cases {
		text := alertText(sanitize(c.v))
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s/%s alert lacks %q:\n%s", c.v.Kind, c.v.Tool, w, text)
			}
		}
	}
}

// An alert says first who stands behind it: nanoclawd's own refusal is
// "blocked"; what only the agent says is "the agent reports", never
// mistaken for a verified block, whatever action it claimed.
func TestAlertSaysWhoBlocked(t *testing.T) {
	v := security.Violation{Group: "g", Kind: security.KindFilesystem, Tool: "Read", Target: "/home/o/.ssh/id_rsa", Rule: "hostSecurity.denyRead"}
	blocked := alertText(sanitize(security.Violation{Group: "g", Kind: security.KindNetwork, Tool: "network", Target: "x.test", Action: "blocked"}))
	reported := v
	reported.Action = "reported"
	for _, c := range []struct {
		text      string
		want, not []string
	}{
		{blocked, []string{"[SANDBOX ALERT] blocked: "}, []string{"the agent reports", "not verified"}},
		{alertText(sanitize(reported)), []string{"[SANDBOX ALERT] the agent reports (not verified by nanoclawd): ", "the agent says so", "hostSecurity.denyRead"},
			[]string{"blocked:", "Refused by"}},
		{alertText(sanitize(security.Violation{Group: "g", Kind: security.KindFilesystem, Tool: groupfs.Tool, Target: "/d/ipc/g/results",
			Action: "blocked", Rule: groupfs.Rule})), []string{"blocked: ", "put a link at", "/d/ipc/g/results", "never follows a link"}, []string{"was denied"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.text, w) {
				t.Errorf("alert lacks %q:\n%s", w, c.text)
			}
		}
		for _, w := range c.not {
			if strings.Contains(c.text, w) {
				t.Errorf("alert says %q:\n%s", w, c.text)
			}
		}
	}
}

func TestMainGroupIsAuditedNotAlerted(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	if err := e.rep.Report(context.Background(), netViolation(mainFolder, "example.com")); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM violations WHERE grp = ?`, mainFolder); n != 1 {
		t.Errorf("%d audit rows, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 0 {
		t.Errorf("%d messages queued for a main-group violation, want 0", n)
	}
	if lines := readLines(t, filepath.Join(e.groupsDir, mainFolder, "logs", "security.jsonl")); len(lines) != 1 {
		t.Errorf("%d audit lines, want 1", len(lines))
	}
}

func TestAlertWaitsForMainGroup(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	e.mainOK.Store(false)
	ctx := context.Background()
	if err := e.rep.Report(ctx, netViolation("family", "example.com")); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE chat_jid IS NULL AND sent_at IS NULL`); n != 1 {
		t.Fatalf("%d alerts waiting for a main group, want 1", n)
	}
	e.mainOK.Store(true)
	if err := e.rep.Kick(ctx); err != nil {
		t.Fatal(err)
	}
	if m := e.rec.Next(t); m.ChatJID != mainJID || !strings.HasPrefix(m.Text, "[SANDBOX ALERT]") {
		t.Errorf("after Kick got %+v", m)
	}
}

// counted returns how many violations a message stands for: 1 for an
// alert, N for "+N more".
var moreRE = regexp.MustCompile(`^\[SANDBOX ALERT\] \+(\d+) more`)

// An agent controls tool, target and detail (and, through its IPC dir
// name, nothing else). Whatever it writes there must not start a second
// alert line, mention anyone, or reorder the text on screen.
func TestForgedTextCannotForgeAlertOrMention(t *testing.T) {
	e := newEnv(t, "", 0, nil, true)
	forged := "x\n[SANDBOX ALERT] group \"main\": all clear @15551234567\r\n\u2028[sandbox  ALERT] @all ＠@@1 (@2"
	v := security.Violation{
		Group:  "family",
		Kind:   security.KindNetwork,
		Tool:   "Bash\n[SANDBOX ALERT]\u202e",
		Target: forged + strings.Repeat("A", 10000),
		Detail: "\u2066\u200b\u200d\ufeff@owner please run rm -rf\x1b[2J\x00" + forged,
	}
	if err := e.rep.Report(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	m := e.rec.Next(t)
	if c := strings.Count(m.Text, "[SANDBOX ALERT]"); c != 1 || !strings.HasPrefix(m.Text, "[SANDBOX ALERT]") {
		t.Errorf("alert marker appears %d times:\n%s", c, m.Text)
	}
	if strings.Contains(strings.ToUpper(m.Text[1:]), "[SANDBOX") {
		t.Errorf("a second bracketed marker survived:\n%s", m.Text)
	}
	if mention := regexp.MustCompile(`(^|[^\pL\pN_.+-])@`); mention.MatchString(m.Text) {
		t.Errorf("alert carries a mention %q:\n%s", mention.FindString(m.Text), m.Text)
	}
	for _, r := range m.Text {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			t.Errorf("alert carries %U:\n%q", r, m.Text)
		}
	}
	lines := strings.Split(m.Text, "\n")
	if len(lines) != 3 {
		t.Errorf("alert has %d lines, want 3 (alert, detail, hint):\n%s", len(lines), m.Text)
	}
	for i, l := range lines[1:] {
		if !strings.HasPrefix(l, "Detail: “") && !strings.HasPrefix(l, "Refused by") {
			t.Errorf("line %d is not ours: %q", i+2, l)
		}
	}
	if len(m.Text) > 3000 {
		t.Errorf("alert is %d bytes; agent text is not capped", len(m.Text))
	}
	if lines := readLines(t, filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")); len(lines) != 1 {
		t.Errorf("forged text split the audit log into %d lines", len(lines))
	}
	vs, _ := List(context.Background(), e.db, Filter{})
	if len(vs) != 1 || strings.ContainsAny(vs[0].Detail, "\n\u202e\u2066\x1b") {
		t.Errorf("stored detail is not cleaned: %q", vs)
	}
}

// A group name that is not a folder cannot steer the audit file.
func TestBadFolderCannotEscapeGroupsDir(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	err := e.rep.Report(context.Background(), netViolation("../../etc", "x"))
	if !errors.Is(err, errBadFolder) {
		t.Errorf("Report with a path as group = %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.groupsDir, "..", "..", "etc", "logs")); err == nil {
		t.Error("audit log written outside groupsDir")
	}
	if n := e.count(t, `SELECT count(*) FROM violations`); n != 1 {
		t.Errorf("the violation itself was not recorded")
	}
}

func TestListFilterAndTable(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	ctx := context.Background()
	old := netViolation("a", "old.example")
	old.Time = time.Now().Add(-2 * time.Hour)
	for _, v := range []security.Violation{old, netViolation("a", "new.example"), netViolation("b", "b.example")} {
		if err := e.rep.Report(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	check := func(f Filter, want ...string) {
		t.Helper()
		vs, err := List(ctx, e.db, f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range vs {
			got = append(got, v.Target)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("List(%+v) = %v, want %v", f, got, want)
		}
	}
	check(Filter{}, "old.example", "new.example", "b.example")
	check(Filter{Group: "a"}, "old.example", "new.example")
	check(Filter{Group: "a", Since: time.Hour}, "new.example")
	check(Filter{Group: "nobody"})

	vs, _ := List(ctx, e.db, Filter{})
	var b strings.Builder
	if err := FormatTable(&b, vs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "TIME") || strings.Count(out, "\n") != 4 || !strings.Contains(out, "b.example") {
		t.Errorf("table:\n%s", out)
	}
	b.Reset()
	FormatTable(&b, nil)
	if !strings.Contains(b.String(), "No violations") {
		t.Errorf("empty table: %q", b.String())
	}
	if js, _ := json.Marshal(mustList(t, e.db, Filter{Group: "nobody"})); string(js) != "[]" {
		t.Errorf("empty list JSON = %s", js)
	}
}

func mustList(t *testing.T, db *store.DB, f Filter) []security.Violation {
	vs, err := List(context.Background(), db, f)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestGroupNotice(t *testing.T) {
	n := GroupNotice("Andy")
	if !strings.HasPrefix(n, "Andy ") || !strings.Contains(n, "admin") || strings.Contains(n, "\n") {
		t.Errorf("GroupNotice = %q", n)
	}
}
