package router

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

// A message run that finds nothing calling the assistant, or a group
// unregistered since, starts no agent and is no run to show: the ledger
// (nil funcs: any call fails the test) is not touched.
func TestRunWithNothingToAnswer(t *testing.T) {
	e := newEnv(t)
	e.r.Ledger = &mock.Ledger{}
	e.post(famJID, alice, "1", "just chatting")
	for _, folder := range []string{"family", "gone"} {
		if err := e.r.Run(context.Background(), runner.Job{Folder: folder}); err != nil {
			t.Errorf("run of %s: %v", folder, err)
		}
	}
}

// A task of a group no longer registered is recorded failed with the
// scheduler, and not retried.
func TestRunTaskOfUnregisteredGroup(t *testing.T) {
	e := newEnv(t)
	var done error
	e.r.Tasks = &mock.Tasks{
		GetFn: func(_ context.Context, id string) (scheduler.Task, error) {
			return scheduler.Task{ID: id, GroupFolder: "gone", ChatJID: "x@g.us"}, nil
		},
		DoneFn: func(_ context.Context, _, _ string, runErr error) error { done = runErr; return nil },
	}
	e.r.Ledger = &mock.Ledger{}
	if err := e.r.Run(context.Background(), runner.Job{Folder: "gone", TaskID: "t1"}); err != nil {
		t.Errorf("run = %v, want nil (a task is not retried)", err)
	}
	if done == nil || !strings.Contains(done.Error(), "gone") {
		t.Errorf("task recorded with %v, want the missing group named", done)
	}
}

// When the queue gives up on a message run, the group is told, and the
// messages that run was given count as answered — not later ones, and
// none when the run failed before it was given any.
func TestGiveUpAnswersTheFailedBatch(t *testing.T) {
	e := newEnv(t)
	e.post(famJID, alice, "1", "@Andy one")
	msgs, _ := e.msgs.Unanswered(context.Background(), famJID)
	e.post(famJID, alice, "2", "@Andy two")

	e.r.GiveUp(runner.Job{Folder: "family"}, errors.New("registry unreadable"))
	if got := e.unanswered(famJID); len(got) != 2 {
		t.Errorf("a run given no messages answered some: unanswered = %q", got)
	}
	fail := runner.NoRetry(&runFailed{err: errors.New("agent crashed\nstack"), top: msgs[0].Seq})
	e.r.GiveUp(runner.Job{Folder: "family"}, fail)
	if got := e.unanswered(famJID); len(got) != 1 || got[0] != "@Andy two" {
		t.Errorf("unanswered after giving up = %q, want the later message only", got)
	}
	got := e.queued(famJID)
	if len(got) != 2 || !strings.Contains(got[1], "Andy could not answer") || !strings.Contains(got[1], "(agent crashed)") {
		t.Errorf("notices = %q", got)
	}
	var kind string
	e.db.QueryRowContext(context.Background(), `SELECT kind FROM outbox ORDER BY id DESC LIMIT 1`).Scan(&kind)
	if kind != outbox.KindNotice {
		t.Errorf("kind %q", kind)
	}
	e.r.GiveUp(runner.Job{Folder: "family", TaskID: "t1"}, fail) // a task: its scheduler records it
	if got := e.queued(famJID); len(got) != 2 {
		t.Errorf("a failed task told the group: %q", got)
	}
}

// An agent started ahead that answers before it was handed a prompt (it
// took a follow-up meant for the group's run from input/ while it was
// being stopped) sends nothing and moves no cursor; once adopted, its
// answers count.
func TestStandbyAnswersOnlyWhatItWasGiven(t *testing.T) {
	e := newEnv(t)
	e.post(famJID, alice, "1", "@Andy one")
	msgs, _ := e.msgs.Unanswered(context.Background(), famJID)
	g, err := e.r.Groups.ByFolder(context.Background(), "family")
	if err != nil {
		t.Fatal(err)
	}
	run := &agentRun{router: e.r, group: g, replyTo: famJID, standby: true}
	text := "echo @Andy one"
	run.OnResult(runner.Result{Status: "success", Result: &text})
	if q := e.queued(famJID); len(q) != 0 {
		t.Errorf("a standby given no prompt got its answer sent: %q", q)
	}
	if u := e.unanswered(famJID); len(u) != 1 {
		t.Errorf("a standby given no prompt moved the cursor: unanswered = %q", u)
	}
	run.adopted, run.cur = "the prompt", startAt(msgs[len(msgs)-1].Seq, "")
	run.OnResult(runner.Result{Status: "success", Result: &text})
	if q := e.queued(famJID); len(q) != 1 || len(e.unanswered(famJID)) != 0 {
		t.Errorf("the adopted standby's answer: queued %q, unanswered %q", q, e.unanswered(famJID))
	}
}

// A result counts as the answer to a follow-up only once the agent has
// taken the follow-up's file from input/: a result it gives of itself
// while the file still waits (an agent asked to finish just as the
// follow-up was written) sends its text but moves no cursor, so the
// follow-up's messages come with the next run instead of being lost.
func TestResultAnswersOnlyAFollowUpTaken(t *testing.T) {
	e := newEnv(t)
	e.post(famJID, alice, "1", "@Andy one")
	first, _ := e.msgs.Unanswered(context.Background(), famJID)
	e.post(famJID, alice, "2", "@Andy two")
	all, _ := e.msgs.Unanswered(context.Background(), famJID)
	g, err := e.r.Groups.ByFolder(context.Background(), "family")
	if err != nil {
		t.Fatal(err)
	}
	run := &agentRun{router: e.r, group: g, replyTo: famJID, cur: startAt(first[0].Seq, ""), ipcDir: t.TempDir()}
	file, err := runner.FollowUp(context.Background(), run.ipcDir, "two", nil)
	if err != nil {
		t.Fatal(err)
	}
	run.cur.hand(all[1].Seq, file)
	say := func(s string) { run.OnResult(runner.Result{Status: "success", Result: &s}) }

	say("one answered")
	say("closed") // the follow-up's file is still in input/
	if got := e.unanswered(famJID); len(got) != 1 || got[0] != "@Andy two" {
		t.Fatalf("unanswered = %q, want the follow-up the agent never took", got)
	}
	if got := e.queued(famJID); len(got) != 2 || got[1] != "closed" {
		t.Errorf("queued = %q, want both texts sent", got)
	}
	os.Remove(file) // the agent takes it
	say("two answered")
	if got := e.unanswered(famJID); len(got) != 0 {
		t.Errorf("unanswered after the follow-up's answer = %q", got)
	}
}
