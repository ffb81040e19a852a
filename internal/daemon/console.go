package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/approvals"
	"github.com/nanoclawd/nanoclawd/internal/console"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

// The owner's console and /metrics (internal/console, internal/metrics):
// built in New, bound in Run after the control socket, which hands out
// its login URLs.

// newConsole builds the console over the daemon's parts.
func (d *Daemon) newConsole() {
	d.console = console.New(console.Options{
		Config: d.Config, Log: d.log.With().Str("part", "console").Logger(), DB: d.db, Status: d.Status,
		Groups: d.reg, Messages: d.messages, Outbox: d.outbox, Usage: d.usage, Tasks: d.sched, Proof: d.proof,
		Actions: consoleActions{d},
		Metrics: d.metrics.Handler(func() string { return d.Config().Console.MetricsToken }),
	})
}

// startConsole binds console.listen and serves it; a port already taken
// is one line in the log and in status, and the daemon runs on without it.
func (d *Daemon) startConsole(goRun func(string, func(context.Context) error)) {
	cfg := d.Config()
	if !cfg.Console.Enabled {
		return
	}
	ln, err := d.console.Listen(cfg.Console)
	d.mu.Lock()
	if err != nil {
		d.consoleState = &status.Console{Error: err.Error()}
	} else {
		d.consoleState = &status.Console{URL: d.console.Address()}
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Error().Err(err).Msg("the console is not served; the daemon runs on without it")
		return
	}
	d.log.Info().Str("url", d.console.Origin()).Str("address", d.console.Address()).Msg("console listening")
	goRun("console", func(ctx context.Context) error { return d.console.Serve(ctx, ln) })
}

// consoleLogin answers the control socket's request for a login URL
// (and, with ?page=1, the private page that opens it).
func (d *Daemon) consoleLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	d.mu.Lock()
	st := d.consoleState
	d.mu.Unlock()
	switch {
	case st == nil:
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]string{"error": "console.enabled is false in " + d.Config().File})
	case st.Error != "":
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]string{"error": st.Error})
	default:
		url, file, err := d.console.Login(r.URL.Query().Get("page") == "1")
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(status.Login{URL: url, File: file})
	}
}

// consoleActions are the console's buttons, each on the path the same
// action takes elsewhere: the owner's chat commands, the CLI's
// reset-session, the scheduler's pause and resume.
type consoleActions struct{ d *Daemon }

const consoleWho = "the owner (console)"

func (a consoleActions) Owner(ctx context.Context, command string) (string, error) {
	return a.d.owner.Act(ctx, command, consoleWho)
}

func (a consoleActions) ResetSession(ctx context.Context, folder string) (string, error) {
	had, err := a.d.messages.ResetSession(ctx, folder)
	if err != nil {
		return "", err
	}
	if err := a.audit(ctx, folder, "session", folder, fmt.Sprintf("%s reset the session of group %s", consoleWho, folder), approvals.ActionSessionReset); err != nil {
		return "", err
	}
	if !had {
		return folder + " has no saved session; its next run starts fresh anyway.", nil
	}
	return "The next run of " + folder + " starts a fresh agent session.", nil
}

func (a consoleActions) Task(ctx context.Context, id, op string) (string, error) {
	t, err := a.d.sched.Get(ctx, id)
	if err != nil {
		return "No task " + id + ": " + err.Error(), nil
	}
	tx, err := a.d.db.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	var did string
	switch op {
	case "run":
		err, did = a.d.sched.RunNow(ctx, tx, id), "runs now"
	case "pause":
		err, did = a.d.sched.Pause(ctx, tx, id), "is paused"
	case "resume":
		err, did = a.d.sched.Resume(ctx, tx, id), "is resumed"
	}
	if errors.Is(err, scheduler.ErrFinished) || (err != nil && op == "run") {
		return "Task " + id + ": " + err.Error() + ": nothing changed.", nil
	}
	if err != nil {
		return "", err
	}
	v := security.Violation{Time: time.Now(), Group: t.GroupFolder, Kind: "task", Tool: "owner", Target: id,
		Detail: fmt.Sprintf("%s: task %s of group %s %s", consoleWho, id, t.GroupFolder, did), Action: approvals.ActionTaskChanged, Rule: "task"}
	if err := a.d.reporter.RecordTx(ctx, tx, v, false); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", err
	}
	if err := a.d.reporter.Flush(ctx); err != nil {
		a.d.log.Warn().Err(err).Msg("console: audit line of a task change")
	}
	a.d.sched.Changed()
	return "Task " + id + " of " + t.GroupFolder + " " + did + ".", nil
}

// audit records an owner's change as the chat's commands do.
func (a consoleActions) audit(ctx context.Context, grp, key, value, detail, action string) error {
	tx, err := a.d.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	v := security.Violation{Time: time.Now(), Group: grp, Kind: "group", Tool: "owner", Target: value, Detail: detail, Action: action, Rule: key}
	if err := a.d.reporter.RecordTx(ctx, tx, v, false); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return a.d.reporter.Flush(ctx)
}
