package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The main chat is a WhatsApp chat and WhatsApp is not paired (what a
// logout leaves): a sandbox alert cannot reach it, so the real daemon
// hands it to alerts.fallback, a real process that gets it on stdin; the
// alert still waits in the outbox for the main chat.
func TestFallbackGetsAlertWhileWhatsAppIsLoggedOut(t *testing.T) {
	got := filepath.Join(t.TempDir(), "fallback.txt")
	in := e2e.New(t, e2e.Options{
		Channels: `"whatsapp": {"enabled": true}`,
		Alerts:   `"cooldown": "0s", "fallback": ["sh", "-c", "cat >> \"$0\"; echo >> \"$0\"", ` + e2e.Quote(got) + `]`,
	})
	in.AddGroup("120363000000000001@g.us", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	in.Post("local:family", "Ann", "@Andy violation network evil.example")
	in.WaitFor("local:family", e2e.Equals("violation reported"))
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(got)
		if s := string(b); strings.Contains(s, "[SANDBOX ALERT]") && strings.Contains(s, "family") && strings.Contains(s, "evil.example") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fallback command got %q", b)
		}
		time.Sleep(50 * time.Millisecond) // polling a file another process writes
	}
	if st := in.CLI("status"); !strings.Contains(st, "120363000000000001@g.us") {
		t.Errorf("the alert no longer waits for the main chat:\n%s", st)
	}
}
