package approvals_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/approvals"
)

// /model FOLDER says the group's model; /model FOLDER MODEL sets it in
// its override (keeping the rest), audited; an unknown model is refused
// with the known ones, and only an approver may.
func TestModelCommand(t *testing.T) {
	e := newEnv(t)
	e.cfg.Agent.Model = "claude-sonnet-4-5"
	if got := e.say(t, ownerJID, "/model family"); got != "family uses claude-sonnet-4-5 (agent.model). /model family MODEL sets another." {
		t.Errorf("/model family: %q", got)
	}
	if got := e.say(t, ownerJID, "/model family gpt-9"); !strings.Contains(got, `Not set: "gpt-9" is not a known model; known: `) || !strings.Contains(got, "claude-haiku-4-5") {
		t.Errorf("an unknown model: %q", got)
	}
	if got := e.say(t, ownerJID, "/model family claude-haiku-4-5"); got != "family now uses claude-haiku-4-5 (was claude-sonnet-4-5 (agent.model)), from its next model request." {
		t.Errorf("/model family claude-haiku-4-5: %q", got)
	}
	if got := e.say(t, ownerJID, "/model family"); !strings.HasPrefix(got, "family uses claude-haiku-4-5.") {
		t.Errorf("after setting: %q", got)
	}
	if got := e.say(t, ownerJID, "/model nosuch claude-haiku-4-5"); !strings.Contains(got, "no group nosuch") {
		t.Errorf("an unknown group: %q", got)
	}
	if got := e.say(t, "4915100000009@s.whatsapp.net", "/model family claude-opus-4-5"); !strings.Contains(got, "only for the owner") {
		t.Errorf("a stranger: %q", got)
	}
	var raw string
	e.db.QueryRowContext(context.Background(), `SELECT security FROM groups WHERE folder = 'family'`).Scan(&raw)
	if raw != `{"model":"claude-haiku-4-5"}` {
		t.Errorf("the override is %s", raw)
	}
	var n int
	e.db.QueryRowContext(context.Background(), `SELECT count(*) FROM violations WHERE grp = 'family' AND action = ?`, approvals.ActionModel).Scan(&n)
	if n != 1 {
		t.Errorf("%d audit rows for the model change, want 1", n)
	}
}
