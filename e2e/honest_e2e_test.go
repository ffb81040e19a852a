package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// A model usage.prices does not know costs something nobody knows: it is
// "unpriced" in usage, status and /groups, and costUSD is null, never 0.
func TestUnpricedModelShownUnpriced(t *testing.T) {
	mock := mockapi.New(t)
	mock.SetUsage(mockUsage)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "env": ["ANTHROPIC_API_KEY", "TESTAGENT_MODEL"]`,
		Env: []string{"ANTHROPIC_API_KEY=sk-ant-real-" + randHex(t), "ANTHROPIC_BASE_URL=" + mock.URL,
			"TESTAGENT_MODEL=local-llm-7b"},
	})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "api 1")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })

	out := in.CLI("usage", "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Fatalf("usage --json: %v\n%s", err, out)
	}
	if cost, ok := list[0]["costUSD"]; !ok || cost != nil {
		t.Errorf("usage --json: costUSD %v (present %t), want null for an unpriced model\n%s", cost, ok, out)
	}
	if text := in.CLI("usage"); !strings.Contains(text, "unpriced local-llm-7b") || strings.Contains(text, "$0.0000") {
		t.Errorf("usage says a price:\n%s", text)
	}
	statusUntil(t, in, "the unpriced request counted", func(r status.Report) bool {
		u := group(r, "main").Usage
		return u != nil && u.Today.Requests == 1
	})
	if text := in.CLI("status"); !strings.Contains(text, "unpriced (1 request)") || strings.Contains(text, "$0.00 (1 request)") {
		t.Errorf("status does not say unpriced:\n%s", text)
	}
	js := in.CLI("status", "--json")
	if !strings.Contains(js, `"costUSD":null`) && !strings.Contains(js, `"costUSD": null`) {
		t.Errorf("status --json has no null cost:\n%s", js)
	}
	in.Post("local:main", "Owner", "/groups")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "Groups:") && strings.Contains(s, "today unpriced") })
}

// On an install whose main chat is on the local channel, WhatsApp enabled
// but never paired is nothing to fix: doctor agrees with setup, which
// calls such an install complete, and only suggests turning it off.
func TestDoctorLocalOnlyNoWhatsAppFix(t *testing.T) {
	in := e2e.New(t, e2e.Options{Channels: `"whatsapp": {"enabled": true}`})
	in.AddGroup("local:main", "main", "--main")
	out, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config)
	if strings.Contains(out, "FIX  whatsapp") || !strings.Contains(out, "WARN whatsapp: not paired, and no registered chat is on WhatsApp") {
		t.Errorf("doctor on a local-only install:\n%s", out)
	}
}

// A clean stop (SIGTERM, as Ctrl-C or systemd) is not a failure: a run it
// cut short is not shown as failed in status, the log has no error about
// it, and a start-time security test it cut short is not reported as a
// sandbox that does not hold.
func TestCleanShutdownIsNotAFailure(t *testing.T) {
	in := e2e.New(t, e2e.Options{StopSignal: syscall.SIGTERM})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	// Stopped at once: the security test of the start is still under way,
	// and a confined run waits for it.
	p := in.Start()
	in.Post("local:family", "Ann", "sleep 30")
	p.Stop()
	// Stopped mid-run: the main group's agent is running.
	p = in.Start()
	in.Post("local:main", "Owner", "sleep 30")
	e2e.WaitProcs(t, e2e.Testagent(t), "the agent")
	p.Stop()
	logText, _ := os.ReadFile(in.Layout().DaemonLog())
	for _, line := range strings.Split(string(logText), "\n") {
		if strings.Contains(line, "does not hold") || strings.Contains(line, `"level":"error"`) {
			t.Errorf("a clean stop logged: %s", line)
		}
	}
	in.Start()
	rep := statusUntil(t, in, "both groups listed", func(r status.Report) bool { return len(r.Groups) == 2 })
	for _, g := range rep.Groups {
		if g.LastRun != nil && !g.LastRun.OK {
			t.Errorf("%s's last run shown as failed: %+v", g.Folder, g.LastRun)
		}
	}
	if text := in.CLI("status"); strings.Contains(text, "context canceled") {
		t.Errorf("status shows the shutdown as a failure:\n%s", text)
	}
}

// Ctrl-C while the main group's agent started ahead (agent.warm) answers:
// the daemon's stop ends that agent too, and status says the run was
// stopped, not that it failed with "context canceled".
func TestCtrlCStopsATakenStandbyCleanly(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "warm": 1`, StopSignal: syscall.SIGINT})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "echo hi")
	in.WaitFor("local:main", e2e.Equals("echo: hi"))
	statusUntil(t, in, "a standby", func(r status.Report) bool { return group(r, "main").Agent == "standby" })
	in.Post("local:main", "Owner", "sleep 30")
	statusUntil(t, in, "the standby answering", func(r status.Report) bool { return group(r, "main").Agent == "running" })
	p.Stop()

	in.Start()
	rep := statusUntil(t, in, "main's last run", func(r status.Report) bool { return group(r, "main").LastRun != nil })
	if l := group(rep, "main").LastRun; !l.Stopped || !l.OK || l.Error != "" {
		t.Errorf("main's last run after Ctrl-C: %+v, want stopped", l)
	}
	text := in.CLI("status")
	if !strings.Contains(text, "stopped") || strings.Contains(text, "failed") || strings.Contains(text, "context canceled") {
		t.Errorf("status after Ctrl-C:\n%s", text)
	}
}

// A message to a chat no group has is not lost in silence: the POST says
// "registered": false, the log says once how to register the chat, and
// status lists it with its count; status shows each group's trigger.
func TestUnregisteredChatIsNotSilent(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	ctx := context.Background()
	for range 3 {
		a, err := in.Local.PostAccepted(ctx, local.Message{ChatJID: "local:nobody", Sender: "n@local", SenderName: "N", Text: "hello?"})
		if err != nil || a.Registered {
			t.Fatalf("POST to an unregistered chat: %+v, %v", a, err)
		}
	}
	if a, err := in.Local.PostAccepted(ctx, local.Message{ChatJID: "local:main", Sender: "o@local", SenderName: "O", Text: "echo hi"}); err != nil || !a.Registered {
		t.Fatalf("POST to the main chat: %+v, %v", a, err)
	}
	rep := statusUntil(t, in, "the unregistered chat", func(r status.Report) bool {
		return len(r.Unregistered) == 1 && r.Unregistered[0] == status.Unheard{ChatJID: "local:nobody", Messages: 3}
	})
	if g := group(rep, "family"); g.Trigger != "@Andy" {
		t.Errorf("family's trigger in status: %q", g.Trigger)
	}
	text := in.CLI("status")
	for _, want := range []string{"messages from unregistered chats: local:nobody ×3", "@Andy …", "every message"} {
		if !strings.Contains(text, want) {
			t.Errorf("status lacks %q:\n%s", want, text)
		}
	}
	logText, _ := os.ReadFile(in.Layout().DaemonLog())
	if n := strings.Count(string(logText), "groups add --jid local:nobody"); n != 1 {
		t.Errorf("the hint to register local:nobody is in the log %d times, want once:\n%s", n, logText)
	}
}
