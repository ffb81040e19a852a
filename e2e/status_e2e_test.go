package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/fit"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// statusUntil runs 'nanoclawd status --json' until ok accepts the report
// (the daemon changes state on its own time; the report is what we wait on).
func statusUntil(t *testing.T, in *e2e.Install, what string, ok func(status.Report) bool) status.Report {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var rep status.Report
		out := in.CLI("status", "--json")
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("status --json: %v\n%s", err, out)
		}
		if ok(rep) {
			return rep
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never showed %s; last:\n%s", what, out)
		}
	}
}

func group(rep status.Report, folder string) status.Group {
	for _, g := range rep.Groups {
		if g.Folder == folder {
			return g
		}
	}
	return status.Group{}
}

// TestStatusOfABusyDaemon: with one agent slot, a failing group waiting to
// retry, a running agent, a queued group, a violation whose alert cannot
// reach the main chat, a task due and a restart-only config edit, status
// shows each of them.
func TestStatusOfABusyDaemon(t *testing.T) {
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "maxConcurrent": 1, "timeout": "120s", "warm": 0`,
		Env:   []string{"NANOCLAWD_RETRY_BASE=1h"}, // a failed run waits to retry while we look
		// Stopped with SIGTERM at the end, so the sleeping confined agent is
		// ended with the daemon and no later test sees it.
		StopSignal: syscall.SIGTERM,
	})
	// The main chat is on WhatsApp, which is disabled: alerts wait in the outbox.
	in.AddGroup("491701234567@s.whatsapp.net", "main", "--main")
	for _, f := range []string{"failing", "busy", "waiting", "risky"} {
		in.AddGroup("local:"+f, f, "--no-trigger")
	}
	in.Start()

	in.Post("local:risky", "Ann", "violation network evil.example")
	in.WaitFor("local:risky", e2e.Equals("violation reported"))
	in.Post("local:failing", "Ann", "crash")
	rep := statusUntil(t, in, "the failed run", func(r status.Report) bool { return group(r, "failing").LastRun != nil })
	if g := group(rep, "failing"); g.Agent != "retrying" || g.Failures != 1 || g.LastRun.OK || !strings.Contains(g.LastRun.Error, "status 3") {
		t.Errorf("failing group: %+v, last run %+v", g, g.LastRun)
	}

	in.Post("local:busy", "Ann", "sleep 100")
	statusUntil(t, in, "busy running", func(r status.Report) bool { return group(r, "busy").Agent == "running" })
	in.Post("local:waiting", "Ann", "echo later")
	rep = statusUntil(t, in, "waiting queued", func(r status.Report) bool { return group(r, "waiting").Agent == "queued" })
	if rep.Agents != (status.Agents{Running: 1, Queued: 1, MaxConcurrent: 1}) {
		t.Errorf("agents: %+v", rep.Agents)
	}
	if g := group(rep, "busy"); g.RunningSince == nil || g.LastRun != nil {
		t.Errorf("busy: %+v", g)
	}
	if g := group(rep, "risky"); g.Agent != "idle" || g.LastRun == nil || !g.LastRun.OK {
		t.Errorf("risky: %+v", g)
	}

	if len(rep.Outbox) != 1 || rep.Outbox[0].ChatJID != "491701234567@s.whatsapp.net" || rep.Outbox[0].Count != 1 ||
		!strings.Contains(rep.Outbox[0].LastError, "no enabled channel") {
		t.Errorf("outbox: %+v", rep.Outbox)
	}
	if len(rep.Violations24h) != 1 || rep.Violations24h[0] != (status.Violations{Group: "risky", Kind: "network", Count: 1}) {
		t.Errorf("violations: %+v", rep.Violations24h)
	}
	if len(rep.Channels) != 1 || rep.Channels[0].Name != "local" || !rep.Channels[0].Connected {
		t.Errorf("channels: %+v", rep.Channels)
	}

	// A task due, written as the scheduler stores it.
	db, err := store.Open(in.Dir + "/data")
	if err != nil {
		t.Fatal(err)
	}
	next := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	_, err = db.ExecContext(context.Background(), `INSERT INTO scheduled_tasks (id, group_folder, chat_jid, prompt, schedule_type,
		schedule_value, context_mode, status, next_run, created_at) VALUES ('t1', 'risky', 'local:risky', 'water the plants', 'cron', '0 9 * * *', 'group', 'active', ?, ?)`,
		next.UnixMilli(), time.Now().UnixMilli())
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	// A key read only at start, edited.
	src, _ := os.ReadFile(in.Config)
	os.WriteFile(in.Config, []byte(strings.Replace(string(src), "{", `{"assistantName": "Bob",`, 1)), 0o600)
	rep = statusUntil(t, in, "the pending restart", func(r status.Report) bool { return len(r.PendingRestart) > 0 })
	if strings.Join(rep.PendingRestart, ",") != "assistantName" {
		t.Errorf("pending restart: %v", rep.PendingRestart)
	}
	if len(rep.NextTasks) != 1 || rep.NextTasks[0].ID != "t1" || !rep.NextTasks[0].NextRun.Equal(next) {
		t.Errorf("next tasks: %+v", rep.NextTasks)
	}
	var cfg struct{ AssistantName string }
	if json.Unmarshal(rep.Config, &cfg); cfg.AssistantName != "Andy" {
		t.Errorf("config in force: assistantName %q, want the running value", cfg.AssistantName)
	}

	// The same, for a person.
	text := in.CLI("status")
	for _, want := range []string{
		`nanoclawd is running: PID \d+`,
		`local\s+serving ` + regexp.QuoteMeta(in.Socket),
		`Agents: 1 running, 1 queued, 0 standby, at most 1 at once`,
		`busy\s+running \S+\s+every message\s+none yet`,
		`waiting\s+queued`,
		`failing\s+retrying \(1 failed\)\s+every message\s+failed \S+ ago: agent for failing`, // all of it in --json
		`risky\s+idle\s+every message\s+ok, \S+ ago`,
		`491701234567@s.whatsapp.net\s+1\s+`,
		`in \S+\s+risky\s+t1\s+cron 0 9 \* \* \*\s+water the plants`,
		`risky\s+network\s+1`,
		`applied after a restart: assistantName`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("status lacks %s:\n%s", want, text)
		}
	}
	// status and doctor read well at 100 columns, in this state too.
	doctor, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config)
	for _, out := range []string{text, doctor} {
		for _, l := range strings.Split(out, "\n") {
			if fit.Len(l) > fit.Width {
				t.Errorf("a line of %d columns: %q", fit.Len(l), l)
			}
		}
	}

}

// TestStatusShowsStandby: with agent.warm, the group last active keeps an
// agent started ahead, and status says so.
func TestStatusShowsStandby(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "warm": 1`})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "echo hi")
	in.WaitFor("local:main", e2e.Equals("echo: hi"))
	rep := statusUntil(t, in, "a standby", func(r status.Report) bool { return group(r, "main").Agent == "standby" })
	if rep.Agents.Standby != 1 || rep.Agents.Running != 0 {
		t.Errorf("agents: %+v", rep.Agents)
	}
	if g := group(rep, "main"); g.StandbySince == nil || g.StandbySince.After(rep.Time) {
		t.Errorf("the standby's age: started %v, status at %v", g.StandbySince, rep.Time)
	}
	if text := in.CLI("status"); !strings.Contains(text, "1 standby") || !strings.Contains(text, "standby for ") {
		t.Errorf("the text lacks the standby or its age:\n%s", text)
	}
	// A run that takes the standby is the group's last run.
	first := *group(rep, "main").LastRun
	in.Post("local:main", "Owner", "echo again")
	in.WaitFor("local:main", e2e.Equals("echo: again"))
	rep = statusUntil(t, in, "the run of the standby", func(r status.Report) bool {
		l := group(r, "main").LastRun
		return l != nil && l.Finished.After(first.Finished)
	})
	if l := group(rep, "main").LastRun; !l.OK || l.Started.Before(first.Finished) {
		t.Errorf("last run after the standby's run: %+v", l)
	}
	// The last run outlives a kill -9 of the daemon.
	last := *group(rep, "main").LastRun
	p.Kill9()
	in.Start()
	rep = statusUntil(t, in, "the daemon after the restart", func(r status.Report) bool { return r.PID != p.Cmd.Process.Pid })
	if l := group(rep, "main").LastRun; l == nil || !l.Finished.Equal(last.Finished) {
		t.Errorf("last run after a restart: %+v, want %+v", l, last)
	}
}

// TestStatusWithoutDaemon says plainly that nothing runs.
func TestStatusWithoutDaemon(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	for _, args := range [][]string{{"status"}, {"status", "--json"}} {
		out, errs, code := e2e.Run(t, "", in.Env, append(args, "--config", in.Config)...)
		if code == 0 || out != "" || !strings.Contains(errs, "no nanoclawd daemon is running on "+in.Dir+"/data") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	// From a directory without a config it says which config it looked for.
	elsewhere := t.TempDir()
	out, errs, code := e2e.Run(t, elsewhere, in.Env, "status")
	if want := "nanoclawd: no config " + filepath.Join(elsewhere, "nanoclaw.config.jsonc") + " here, so status asked the daemon of the default data dir " + filepath.Join(elsewhere, "data") + ": no nanoclawd daemon is running"; code == 0 || out != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Errorf("status elsewhere: exit %d, stdout %q, stderr %q; want %q…", code, out, errs, want)
	}
}
