package sdkproof

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// outageTimeout is agent.apiTimeout in these tests: small, so that they
// are quick. docs/models.md records the times they measured.
const outageTimeout = 4 * time.Second

// outageInstall is the daemon with the real agent runner and SDK, every
// group on provider p1 (at p1URL) and, when p2URL is set, p2 as the
// fallback; main and family (confined) are registered. Agents are not
// asked to finish for 3 minutes of quiet, so a run that ends sooner was
// ended by the daemon.
func outageInstall(t *testing.T, w *world, p1URL, p2URL string) *e2e.Install {
	t.Helper()
	agent := `"provider": "p1", "apiTimeout": "` + outageTimeout.String() + `"`
	providers := `"p1": {"url": ` + e2e.Quote(p1URL) + `, "credential": "p1-key"}`
	if p2URL != "" {
		agent += `, "fallback": [{"provider": "p2"}]`
		providers += `, "p2": {"url": ` + e2e.Quote(p2URL) + `, "credential": "p2-key"}`
	}
	o := daemonOptions(t, w, p1URL, "3m", agent)
	o.Top = `"providers": {` + providers + `}`
	o.Wait = errorWait
	in := e2e.New(t, o)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	return in
}

// untilTold posts text to chat and waits for the chat's "could not
// answer"; it returns that sentence and how long it took.
func untilTold(in *e2e.Install, chat, text string) (string, time.Duration) {
	t0 := time.Now()
	in.Post(chat, "Owner", text)
	sent := e2e.InChat(in.WaitFor(chat, func(s string) bool { return strings.Contains(s, "could not answer") }), chat)
	return sent[len(sent)-1], time.Since(t0)
}

// agentEnded waits until status shows no agent running for folder: the
// daemon stopped it (its idle timeout is minutes away).
func agentEnded(t *testing.T, in *e2e.Install, folder string) {
	t.Helper()
	deadline := time.Now().Add(errorWait)
	for {
		var rep status.Report
		if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		if g := groupOf(rep, folder); g != nil && g.Agent != "running" {
			if g.Failures != 0 {
				t.Errorf("%s: %d failures queued for a retry; want none (the chat was told)", folder, g.Failures)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent of %s still runs after no upstream answered", folder)
		}
		time.Sleep(100 * time.Millisecond) // polling the daemon's status
	}
}

// requestsTo is how many model requests s received.
func requestsTo(s *mockapi.Server) int {
	n := 0
	for _, r := range s.Log() {
		if strings.HasPrefix(r.Path, "/v1/messages") {
			n++
		}
	}
	return n
}

// A model API that accepts connections and never answers: the real SDK
// would retry the relay's error for minutes; the daemon ends the attempt
// instead, so the chat hears the sentence about apiTimeout after the
// message, and the upstream sees one request per user message. With the
// fallback hanging too, each upstream sees one.
func TestSDKHangingUpstreamEndsTheTurn(t *testing.T) {
	w := newWorld(t)
	p1, p2 := mockapi.New(t), mockapi.New(t)
	dumpOnFailure(t, w, p1)
	in := outageInstall(t, w, p1.URL, p2.URL)
	in.Start()
	in.Post("local:main", "Owner", "hello Andy")
	in.WaitFor("local:main", func(s string) bool { return s != "" && !strings.Contains(s, "could not answer") })

	p1.Hang(true)
	p2.Hang(true)
	before1, before2 := requestsTo(p1), requestsTo(p2)
	said, took := untilTold(in, "local:main", "hello again")
	t.Logf("main, p1 and its fallback hanging, apiTimeout %s: told after %s: %q", outageTimeout, took.Round(100*time.Millisecond), said)
	if !strings.HasPrefix(said, "Andy could not answer: the model API could not be reached.") {
		t.Errorf("the chat heard %q", said)
	}
	agentEnded(t, in, "main")
	if n1, n2 := requestsTo(p1)-before1, requestsTo(p2)-before2; n1 != 1 || n2 != 1 {
		t.Errorf("for one message p1 got %d requests and the fallback %d; want one each", n1, n2)
	}

	// A confined group, its relay in the sandbox's gateway: the same.
	before1, before2 = requestsTo(p1), requestsTo(p2)
	said, took = untilTold(in, "local:family", "hello Andy")
	t.Logf("family (confined), both hanging: told after %s: %q", took.Round(100*time.Millisecond), said)
	if said != "Andy could not answer: the model API could not be reached. The owner was told." {
		t.Errorf("family heard %q", said)
	}
	agentEnded(t, in, "family")
	if n1, n2 := requestsTo(p1)-before1, requestsTo(p2)-before2; n1 != 1 || n2 != 1 {
		t.Errorf("for one message of family p1 got %d requests and the fallback %d; want one each", n1, n2)
	}
	// The bound the owner is promised (apiTimeout × 2 + 15 s) has room to
	// spare here; this one only catches minutes of retries coming back.
	if limit := 2*outageTimeout + errorWait; took > limit {
		t.Errorf("the chat waited %s, past %s", took, limit)
	}
}

// One provider, no fallback, hanging: the chat hears it about apiTimeout
// after the message; the provider saw one request.
func TestSDKSingleHangingUpstream(t *testing.T) {
	w := newWorld(t)
	p1 := mockapi.New(t)
	dumpOnFailure(t, w, p1)
	p1.Hang(true)
	in := outageInstall(t, w, p1.URL, "")
	in.Start()
	said, took := untilTold(in, "local:main", "hello Andy")
	t.Logf("main, its only provider hanging, apiTimeout %s: told after %s (the agent's start included): %q", outageTimeout, took.Round(100*time.Millisecond), said)
	if !strings.HasPrefix(said, "Andy could not answer: the model API could not be reached.") {
		t.Errorf("the chat heard %q", said)
	}
	agentEnded(t, in, "main")
	if n := requestsTo(p1); n != 1 {
		t.Errorf("the provider got %d requests for one message, want 1", n)
	}
	if limit := outageTimeout + errorWait; took > limit {
		t.Errorf("the chat waited %s, past %s", took, limit)
	}
}

// A single upstream overloaded once: its 529 reaches the SDK, which backs
// off and asks again, and the chat gets its answer.
func TestSDKBacksOffASingle529(t *testing.T) {
	w := newWorld(t)
	p1 := mockapi.New(t)
	dumpOnFailure(t, w, p1)
	in := outageInstall(t, w, p1.URL, "")
	in.Start()
	p1.FailNext(1, 529, "overloaded_error", "Overloaded", "1")
	in.Post("local:main", "Owner", "hello Andy")
	got := in.WaitFor("local:main", func(s string) bool { return s != "" })
	if said := e2e.InChat(got, "local:main"); strings.Contains(said[0], "could not answer") {
		t.Fatalf("one 529 ended the turn: %q", said)
	}
	n := requestsTo(p1)
	t.Logf("answered after one 529: the provider got %d requests", n)
	if n < 2 {
		t.Errorf("the provider got %d requests: the 529 was not asked again", n)
	}
}

// A provider with an empty credential (a local model server) needs no
// key anywhere: with no ANTHROPIC_API_KEY in the daemon's environment or
// agent.env, the main group and a confined one are answered through it,
// and it is sent no credential at all.
func TestSDKKeylessProvider(t *testing.T) {
	w := newWorld(t)
	local := mockapi.New(t)
	dumpOnFailure(t, w, local)
	o := daemonOptions(t, w, local.URL, "3m", `"provider": "local"`)
	o.Agent = strings.Replace(o.Agent, `"ANTHROPIC_API_KEY", `, "", 1)
	o.Env = []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	o.Top = `"providers": {"local": {"url": ` + e2e.Quote(local.URL) + `, "credential": ""}}`
	o.Wait = errorWait
	in := e2e.New(t, o)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	for _, chat := range []string{"local:main", "local:family"} {
		in.Post(chat, "Owner", "hello Andy")
		said := e2e.InChat(in.WaitFor(chat, func(s string) bool { return s != "" }), chat)
		if strings.Contains(said[0], "could not answer") {
			t.Fatalf("%s: %q", chat, said)
		}
	}
	if requestsTo(local) == 0 {
		t.Fatal("the local provider got no request")
	}
	for _, r := range local.Log() {
		if k, a := r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"); k != "" || a != "" {
			t.Errorf("the keyless provider was sent X-Api-Key %q, Authorization %q", k, a)
		}
	}
	if doc, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config); !strings.Contains(doc, "ok   credentials") {
		t.Errorf("doctor asks for a credential no group needs:\n%s", doc)
	}
}
