package e2e_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// An agent's error result is answered in its chat at once with one plain
// sentence, the main chat hears the detail once (with nothing secret in
// it), and a failure a retry cannot fix ends the run instead of leaving it
// to wait for follow-ups; it is not retried. A credential error is called
// a refusal only when an upstream refused one (TestRefusedCredentialToldOnce):
// here none did.
func TestAgentErrorReachesTheChat(t *testing.T) {
	// A credential is set and passed on.
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "env": ["ANTHROPIC_API_KEY"]`,
		Env: []string{"ANTHROPIC_API_KEY=sk-ant-api03-set"}})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	const key = "sk-ant-api03-NOTFORCHATS"
	invalid := "Andy could not answer: the model API refused the request as invalid. The owner was told."

	// The stand-in agent stays after its error, as the real runner does;
	// only the daemon asking it to finish ends it before its idle timeout
	// (60 s).
	in.Post("local:family", "Alice", "fail-wait API Error: 400 invalid_request_error: bad key field "+key)
	in.WaitFor("local:family", e2e.Equals(invalid))
	e2e.WaitNoProcs(t, e2e.Testagent(t), "agents after an invalid request")

	// A second failure: the chat hears it again, the owner does not.
	in.Post("local:family", "Alice", "fail API Error: 400 prompt is too long")
	n := 0
	in.WaitFor("local:family", func(s string) bool {
		if s == invalid {
			n++
		}
		return n == 2
	})
	in.Post("local:main", "Owner", "echo after")
	in.WaitFor("local:main", e2e.Equals("echo: after"))
	var details []string
	for _, m := range in.AllSent() {
		if strings.Contains(m.Text, key) {
			t.Errorf("a chat got the credential: %q", m.Text)
		}
		if m.ChatJID == "local:main" && strings.Contains(m.Text, "could not answer") {
			details = append(details, m.Text)
		}
	}
	if len(details) != 1 || !strings.Contains(details[0], "family") || !strings.Contains(details[0], "bad key field [redacted]") ||
		!strings.Contains(details[0], "/new") {
		t.Errorf("the main chat's details of the failure = %q, want one naming the group, the error and the fix", details)
	}
	// One run per message: nothing was retried.
	if logs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", "family", "logs", "*.log")); len(logs) != 2 {
		t.Errorf("%d runs of family, want 2 (one per message, no retries)", len(logs))
	}

	// The CLI's word for a key trouble, with a key set and no upstream
	// refusing it: not called a refusal.
	in.Post("local:family", "Alice", "fail Invalid API key · Fix external API key")
	in.WaitFor("local:family", e2e.Equals("Andy could not answer: the agent's request did not reach the model API with a credential. The owner was told."))

	// After an answer, a new kind of failure is news again; in the main
	// chat itself the answer carries the detail.
	in.Post("local:main", "Owner", "fail API Error: Connection refused (ECONNREFUSED)")
	unreachable := func(s string) bool {
		return strings.HasPrefix(s, "Andy could not answer: the model API could not be reached.")
	}
	got := e2e.InChat(in.WaitFor("local:main", unreachable), "local:main")
	if last := got[len(got)-1]; !strings.Contains(last, "ECONNREFUSED") || !strings.Contains(last, "network") {
		t.Errorf("main chat's answer to an unreachable API: %q", last)
	}
}

// With no credential set, the Claude CLI says "Not logged in · Please run
// /login": the chat hears that a credential is missing, and neither that
// one was refused nor the CLI's /login. The owner hears only the step
// still missing: agent.env already lists the key, so not to add it there.
func TestNoCredentialSaysSo(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "env": ["ANTHROPIC_API_KEY"]`, Home: t.TempDir()})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	in.Post("local:family", "Alice", "fail Invalid API key · Please run /login")
	want := "Andy could not answer: no model credential is set: the daemon has no API key or OAuth token to give the model API. The owner was told."
	in.WaitFor("local:family", e2e.Equals(want))
	in.Post("local:main", "Owner", "fail Not logged in · Please run /login")
	main := in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "Andy could not answer") }).Text
	if !strings.Contains(main, "no model credential is set") || !strings.Contains(main, "agent.env lists ANTHROPIC_API_KEY, but it is set nowhere: put ANTHROPIC_API_KEY=… in nanoclawd.env") ||
		strings.Contains(main, "add its name") {
		t.Errorf("the main chat's answer does not name the missing credential and its fix: %q", main)
	}
	for _, m := range in.AllSent() {
		if strings.Contains(m.Text, "/login") || strings.Contains(m.Text, "refused") {
			t.Errorf("a chat was told %q", m.Text)
		}
	}
}
