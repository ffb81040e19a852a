package sdkproof

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// errorWait is how long a chat may wait for its answer when the model API
// fails: the promise the owner is given, not a performance threshold.
const errorWait = 60 * time.Second

// apiErrorInstall is the daemon with the real agent runner and SDK,
// talking to the model API at baseURL, every wait bounded by errorWait.
// Agents are not asked to finish for 3 minutes of quiet, so a run that ends
// sooner was ended by the daemon.
func apiErrorInstall(t *testing.T, w *world, baseURL string) *e2e.Install {
	t.Helper()
	o := daemonOptions(t, w, baseURL, "3m")
	o.Wait = errorWait
	in := e2e.New(t, o)
	in.AddGroup("local:main", "main", "--main")
	return in
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// With the model API unreachable, "hello Andy" in the main chat gets a plain
// error message there within a minute (the SDK's own retries are bounded),
// not silence for minutes.
func TestUnreachableAPIAnsweredInTheChat(t *testing.T) {
	w := newWorld(t)
	in := apiErrorInstall(t, w, closedPort(t))
	in.Start()
	t0 := time.Now()
	in.Post("local:main", "Owner", "hello Andy")
	got := e2e.InChat(in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "could not answer") }), "local:main")
	t.Logf("answered after %v: %q", time.Since(t0).Round(time.Millisecond), got)
	if !strings.HasPrefix(got[0], "Andy could not answer: the model API could not be reached.") {
		t.Errorf("main chat got %q, want it told the model API could not be reached", got)
	}
}

// A refused credential (the mock answers 401, as the API does to a bad
// key) reaches a confined group's chat as one plain sentence through the
// relay, the main chat gets the relay's one [CREDENTIAL] message (naming
// the group and the fix, and nothing more about it), and the run ends
// rather than waiting for follow-ups.
func TestRefusedCredentialAnsweredInTheChat(t *testing.T) {
	w := newWorld(t)
	mock := mockapi.New(t)
	mock.Fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
	dumpOnFailure(t, w, mock)
	in := apiErrorInstall(t, w, mock.URL)
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	in.Post("local:family", "Eve", "hello Andy")
	in.WaitFor("local:family", e2e.Equals("Andy could not answer: the model API refused its credential. The owner was told."))
	detail := e2e.InChat(in.AllSent(), "local:main")
	if len(detail) != 1 || !strings.HasPrefix(detail[0], "[CREDENTIAL]") || !strings.Contains(detail[0], "family") || !strings.Contains(detail[0], "ANTHROPIC_API_KEY") {
		t.Errorf("main chat got %q, want one [CREDENTIAL] message naming the group and the fix", detail)
	}
	// idleTimeout is 3 minutes: only the daemon asking it to finish ends
	// the run sooner. Its end is the group's last run, failed.
	deadline := time.Now().Add(errorWait)
	for {
		var rep status.Report
		if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		if g := groupOf(rep, "family"); g != nil && g.LastRun != nil && g.Agent != "running" {
			if g.LastRun.OK || g.Failures != 0 {
				t.Errorf("family after a refused credential: last run %+v, %d failures queued for a retry; want one failed run, not retried", g.LastRun, g.Failures)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent still runs after its credential was refused")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func groupOf(rep status.Report, folder string) *status.Group {
	for i := range rep.Groups {
		if rep.Groups[i].Folder == folder {
			return &rep.Groups[i]
		}
	}
	return nil
}
