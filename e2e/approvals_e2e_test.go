package e2e_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The owner answers an alert from the main chat. A confined stand-in agent
// asks the gateway for a domain it may not reach; the alert carries a
// code; /allow CODE adds exactly that domain to the group's override (as
// security show prints it), a reused code changes nothing, /undo takes it
// back, and /pause keeps a group's messages without a run until /resume.
// None of the commands reaches the main group's agent.
func TestOwnerAnswersAlertsFromTheMainChat(t *testing.T) {
	in := e2e.New(t, e2e.Options{Security: `"network": {"allowedDomains": ["api.example.org"]}`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()

	in.Post("local:family", "Eve", "fetch https://blocked.example.net/x")
	in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "fetch https://blocked.example.net/x: refused") })
	alert := in.WaitNext("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "blocked.example.net")
	}).Text
	m := regexp.MustCompile(`\nReply /allow ([A-Z0-9]{3}) to allow this for family\.$`).FindStringSubmatch(alert)
	if m == nil {
		t.Fatalf("the alert offers no code:\n%s", alert)
	}
	code := m[1]

	domains := func() []string {
		t.Helper()
		var shown struct {
			Network struct {
				AllowedDomains []string `json:"allowedDomains"`
			} `json:"network"`
		}
		if err := json.Unmarshal([]byte(in.CLI("security", "show", "family", "--json")), &shown); err != nil {
			t.Fatal(err)
		}
		return shown.Network.AllowedDomains
	}
	if d := domains(); !slices.Equal(d, []string{"api.example.org"}) {
		t.Fatalf("before /allow family may reach %v", d)
	}

	in.Post("local:main", "Owner", "/allow "+code)
	in.WaitNext("local:main", func(s string) bool {
		return strings.HasPrefix(s, "Allowed for family: network.allowedDomains + blocked.example.net")
	})
	if d := domains(); !slices.Equal(d, []string{"api.example.org", "blocked.example.net"}) {
		t.Errorf("after /allow family may reach %v, want the global list and exactly blocked.example.net", d)
	}
	in.Post("local:main", "Owner", "/allow "+code)
	in.WaitNext("local:main", func(s string) bool { return strings.Contains(s, "already used") })

	in.Post("local:main", "Owner", "/undo")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "Undone for family") })
	if d := domains(); !slices.Equal(d, []string{"api.example.org"}) {
		t.Errorf("after /undo family may reach %v", d)
	}
	if v := in.CLI("violations", "--group", "family"); !strings.Contains(v, "allowed-by-owner") {
		t.Errorf("violations does not list the owner's change:\n%s", v)
	}

	in.Post("local:main", "Owner", "/pause family")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "Paused family") })
	in.Post("local:family", "Eve", "echo kept for later")
	// The router decides as it stores the message, and says so.
	held := func() bool {
		b, _ := os.ReadFile(in.Layout().DaemonLog())
		return strings.Contains(string(b), "group paused by the owner")
	}
	for deadline := time.Now().Add(30 * time.Second); !held(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the paused group's message was not held (no word of it in the daemon's log)")
		}
	}
	in.Post("local:main", "Owner", "/groups")
	in.WaitNext("local:main", func(s string) bool { return strings.Contains(s, "- family (family): paused") })
	for _, s := range e2e.InChat(in.AllSent(), "local:family") {
		if strings.Contains(s, "kept for later") {
			t.Fatalf("family answered while paused: %q", s)
		}
	}
	in.Post("local:main", "Owner", "/resume family")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "Resumed family") })
	in.WaitFor("local:family", e2e.Equals("echo: kept for later"))

	for _, s := range e2e.InChat(in.AllSent(), "local:main") {
		if strings.HasPrefix(s, "echo: /") {
			t.Errorf("an owner's command reached the main agent: %q", s)
		}
	}
}
