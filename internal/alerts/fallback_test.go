package alerts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

// fallbackEnv is a reporter over a real database whose main chat's link
// is what the test says, and a fallback command (a real process) that
// appends each text it gets, and a separator, to a file.
func fallbackEnv(t *testing.T) (*env, *Fallback, *atomic.Pointer[[2]any], string) {
	t.Helper()
	e := newEnv(t, "", time.Hour, nil, false)
	got := filepath.Join(t.TempDir(), "got")
	var state atomic.Pointer[[2]any]
	state.Store(&[2]any{time.Time{}, false})
	link := &mock.Link{OutageFn: func() (time.Time, bool) { s := state.Load(); return s[0].(time.Time), s[1].(bool) }}
	main := &mock.MainChat{MainChatFn: func(context.Context) (string, string, bool) { return mainFolder, mainJID, true }}
	fb := &Fallback{DB: e.db, Command: []string{"sh", "-c", `cat >> "$0"; echo "<END>" >> "$0"`, got},
		Cooldown: time.Minute, Link: link, Main: main, Out: e.out}
	return e, fb, &state, got
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func report(t *testing.T, e *env, target string) {
	t.Helper()
	if err := e.rep.Report(context.Background(), security.Violation{Group: "family", Kind: "network", Tool: "Bash", Target: target, Action: "blocked"}); err != nil {
		t.Fatal(err)
	}
}

// While WhatsApp is logged out, alerts go to the fallback command, each
// once; several are folded into one text and one message for the main
// chat; nothing goes there while the link is up; and everything still
// reaches the main chat once it can be sent.
func TestFallbackReceivesAlertsWhenLoggedOut(t *testing.T) {
	e, fb, state, got := fallbackEnv(t)
	ctx := context.Background()
	report(t, e, "evil.example")
	if n, err := fb.Deliver(ctx); n != 0 || err != nil || read(t, got) != "" {
		t.Fatalf("link up: delivered %d (%v), file %q", n, err, read(t, got))
	}
	state.Store(&[2]any{time.Now(), true}) // logged out
	if n, err := fb.Deliver(ctx); n != 1 || err != nil {
		t.Fatalf("logged out: delivered %d, %v", n, err)
	}
	if s := read(t, got); !strings.Contains(s, "[SANDBOX ALERT]") || !strings.Contains(s, "family") || !strings.Contains(s, "evil.example") {
		t.Fatalf("the fallback command got %q", s)
	}
	if n, _ := fb.Deliver(ctx); n != 0 || strings.Count(read(t, got), "<END>") != 1 {
		t.Fatalf("an alert went to the fallback twice: %q", read(t, got))
	}
	report(t, e, "one.example")
	report(t, e, "two.example")
	if n, err := fb.Deliver(ctx); n != 2 || err != nil {
		t.Fatalf("two more: delivered %d, %v", n, err)
	}
	second := strings.SplitN(read(t, got), "<END>", 2)[1]
	if !strings.Contains(second, "2 alerts could not reach the main chat (WhatsApp logged out)") ||
		!strings.Contains(second, "one.example") || !strings.Contains(second, "two.example") {
		t.Fatalf("folded fallback text %q", second)
	}
	// Back: the main chat gets the first alert and the two folded into one.
	state.Store(&[2]any{time.Time{}, false})
	e.start(t)
	first, folded := e.rec.Next(t), e.rec.Next(t)
	if first.ChatJID != mainJID || !strings.Contains(first.Text, "evil.example") {
		t.Errorf("first to main: %+v", first)
	}
	if !strings.HasPrefix(folded.Text, "2 alerts while WhatsApp could not reach this chat") ||
		!strings.Contains(folded.Text, "one.example") || !strings.Contains(folded.Text, "two.example") {
		t.Errorf("folded to main: %q", folded.Text)
	}
	if extra, ok := e.rec.Extra(); ok {
		t.Errorf("sent beyond the folded message: %q", extra.Text)
	}
}

// A disconnection shorter than alerts.cooldown sends nothing to the
// fallback; a longer one does. A failing command is an error that names
// it, and the alert is tried again.
func TestFallbackAfterCooldownAndRetry(t *testing.T) {
	e, fb, state, got := fallbackEnv(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	fb.Now = func() time.Time { return now }
	report(t, e, "evil.example")
	state.Store(&[2]any{now.Add(-30 * time.Second), false})
	if n, _ := fb.Deliver(ctx); n != 0 {
		t.Fatalf("delivered %d within the cooldown", n)
	}
	fb.Command = []string{"sh", "-c", "echo no route >&2; exit 3"}
	now = now.Add(time.Minute)
	if _, err := fb.Deliver(ctx); err == nil || !strings.Contains(err.Error(), `alerts.fallback "sh" failed`) || !strings.Contains(err.Error(), "no route") {
		t.Fatalf("failing command: %v", err)
	}
	fb.Command = []string{"sh", "-c", `cat >> "$0"`, got}
	if n, err := fb.Deliver(ctx); n != 1 || err != nil || !strings.Contains(read(t, got), "evil.example") {
		t.Fatalf("after the cooldown: %d, %v, %q", n, err, read(t, got))
	}
}

// The logout itself reaches the fallback at once and waits for the main
// chat like an alert.
func TestFallbackOutageNotice(t *testing.T) {
	e, fb, state, got := fallbackEnv(t)
	state.Store(&[2]any{time.Now(), true})
	if err := fb.Outage(context.Background(), "[WHATSAPP LOGGED OUT] pair again"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(read(t, got), "[WHATSAPP LOGGED OUT]") {
		t.Fatalf("fallback got %q", read(t, got))
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE kind = ? AND sent_at IS NULL`, outbox.KindOutage); n != 1 {
		t.Errorf("%d outage notices wait for the main chat, want 1", n)
	}
}
