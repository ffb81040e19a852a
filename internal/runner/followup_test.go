package runner

// Follow-ups, _close and the idle end of a run.

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

// A follow-up reaches the running agent; then silence makes the runner
// write _close and the agent finishes cleanly.
func TestRunFollowUpThenIdleClose(t *testing.T) {
	spec := newSpec(t, "followup")
	spec.IdleTimeout = 200 * time.Millisecond
	h := &recorder{}
	h.react = func(r Result) {
		if *r.Result == "ready" {
			if _, err := FollowUp(context.Background(), spec.IPCDir, "more <please>", nil); err != nil {
				t.Error(err)
			}
		}
	}
	out, err := run(t, spec, h)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.texts(); !slices.Equal(got, []string{"ready", "followup: more <please>", "closed"}) {
		t.Fatalf("results %q", got)
	}
	if !out.Closed || out.TimedOut {
		t.Fatalf("outcome %+v", out)
	}
	if !strings.Contains(readLog(t, out), "no output for 200ms: writing _close") {
		t.Fatal("log does not say why _close was written")
	}
}

func TestRunClosingAndStaleInput(t *testing.T) {
	spec := newSpec(t, "followup")
	// Left over from a previous run: both must be gone before the agent starts.
	if _, err := FollowUp(context.Background(), spec.IPCDir, "stale", nil); err != nil {
		t.Fatal(err)
	}
	if err := Close(context.Background(), spec.IPCDir, nil); err != nil {
		t.Fatal(err)
	}
	closing := make(chan struct{})
	h := &recorder{}
	h.react = func(r Result) {
		if *r.Result == "ready" {
			close(closing)
		}
	}
	spec.Closing = closing
	out, err := run(t, spec, h)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.texts(); !slices.Equal(got, []string{"ready", "closed"}) {
		t.Fatalf("results %q (stale input reached the agent?)", got)
	}
	if !out.Closed {
		t.Fatalf("outcome %+v", out)
	}
}

func TestFollowUpFiles(t *testing.T) {
	ipc := t.TempDir()
	for _, text := range []string{"first", "second", "third"} {
		if _, err := FollowUp(context.Background(), ipc, text, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := Close(context.Background(), ipc, nil); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(layout.IPCDir(ipc).Input())
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range ents { // ReadDir sorts by name
		b, err := os.ReadFile(filepath.Join(layout.IPCDir(ipc).Input(), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == layout.CloseFile {
			if len(b) != 0 {
				t.Fatalf("_close holds %q", b)
			}
			continue
		}
		if !strings.HasSuffix(e.Name(), ".json") {
			t.Fatalf("stray file %s", e.Name())
		}
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil || m["type"] != "message" || len(m) != 2 {
			t.Fatalf("%s: %s", e.Name(), b)
		}
		texts = append(texts, m["text"])
	}
	if !slices.Equal(texts, []string{"first", "second", "third"}) {
		t.Fatalf("follow-ups in name order: %q", texts)
	}
}

// An agent that answered, went quiet and ignores the idle _close is ended
// CloseGrace after it, even with no hard timeout set.
func TestRunIdleCloseGrace(t *testing.T) {
	spec := newSpec(t, "fork hang")
	spec.Timeout = 0
	spec.IdleTimeout = 100 * time.Millisecond
	spec.CloseGrace = 200 * time.Millisecond
	spec.KillGrace = 100 * time.Millisecond
	h := &recorder{}
	out, err := run(t, spec, h)
	// It had answered, so the timeout is no failure.
	if err != nil || !out.TimedOut || !out.Closed {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	gone(t, out.PID)
	gone(t, forkedPID(t, h))
}

// A group that replaced input/ and logs/ with links to a host directory
// (the canary): clearing the stale input deleted every file there, and the
// run log and _close were written through. Now each link is removed and
// reported, and the run goes on with real directories.
func TestRunDoesNotFollowInputOrLogsLinks(t *testing.T) {
	spec := newSpec(t, "hello")
	c := groupfstest.NewCanary(t)
	rep := &groupfstest.Reporter{}
	spec.Reporter = rep
	input := layout.IPCDir(spec.IPCDir).Input()
	c.Link(t, input)
	c.Link(t, spec.LogDir)
	h := &recorder{}
	if _, err := run(t, spec, h); err != nil {
		t.Fatal(err)
	}
	if got := h.texts(); !slices.Equal(got, []string{"echo: hello"}) {
		t.Fatalf("results %q; want the agent's answer", got)
	}
	// A follow-up and a _close after the run start: through a fresh link too.
	c.Link(t, input)
	if _, err := FollowUp(context.Background(), spec.IPCDir, "more", rep); err != nil {
		t.Fatal(err)
	}
	c.Intact(t)
	for _, dir := range []string{input, spec.LogDir} {
		groupfstest.IsRealDir(t, dir)
	}
	rep.Reported(t, spec.LogDir)
	if n := len(rep.Got()); n != 3 {
		t.Errorf("%d links reported, want 3 (input twice, logs once): %+v", n, rep.Got())
	}
}

// Attack: an agent that never answers and ignores SIGTERM. The idle path
// asks it to finish and would wait CloseGrace (here an hour); the hard
// limit of its turn still ends it, SIGKILL after KillGrace.
func TestRunHardTimeoutHoldsDuringIdleGrace(t *testing.T) {
	spec := newSpec(t, "hang")
	spec.Timeout = 300 * time.Millisecond
	spec.IdleTimeout = 100 * time.Millisecond
	spec.CloseGrace = time.Hour
	spec.KillGrace = 100 * time.Millisecond
	// A generous bound: a run still going then was not ended by its limits.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := Run(ctx, spec, &recorder{})
	if !errors.Is(err, ErrTimeout) || !out.TimedOut || !out.Closed {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	gone(t, out.PID)
	log := readLog(t, out)
	if !strings.Contains(log, "hard timeout 300ms: SIGTERM") || !strings.Contains(log, "SIGKILL to process group") {
		t.Fatalf("log:\n%s", log)
	}
}

// An agent started ahead is under neither turn limit until it is given
// its prompt: quiet for several idle timeouts, it is still there to take
// it; from the prompt on, the hard limit holds.
func TestRunStandbyLimitsStartAtItsPrompt(t *testing.T) {
	for _, tc := range []struct {
		command string
		check   func(Outcome, error, []string) bool
	}{
		{"echo warm", func(out Outcome, err error, texts []string) bool {
			return err == nil && slices.Equal(texts, []string{"echo: warm"})
		}},
		{"hang", func(out Outcome, err error, texts []string) bool {
			return errors.Is(err, ErrTimeout) && out.Results == 0
		}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			spec := newSpec(t, "")
			spec.Input.Prompt, spec.Input.Standby = "", true
			spec.Timeout = 300 * time.Millisecond
			spec.IdleTimeout = 100 * time.Millisecond
			spec.KillGrace = 100 * time.Millisecond
			prompted := make(chan struct{})
			spec.Prompted = prompted
			h := &recorder{}
			started := make(chan struct{})
			h.onStart = func() { close(started) }
			go func() {
				<-started
				time.Sleep(5 * spec.IdleTimeout) // the quiet hours, not a synchronisation
				if _, err := FollowUp(context.Background(), spec.IPCDir, prompt(tc.command), nil); err != nil {
					t.Error(err)
				}
				close(prompted)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := Run(ctx, spec, h)
			if !tc.check(out, err, h.texts()) {
				t.Fatalf("err %v, results %q, outcome %+v\n%s", err, h.texts(), out, readLog(t, out))
			}
			if log := readLog(t, out); !strings.Contains(log, "given its first prompt") {
				t.Fatalf("log:\n%s", log)
			}
		})
	}
}
