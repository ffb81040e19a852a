package sdkproof

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/e2e"
	"github.com/nanoclawd/nanoclawd/internal/mockapi"
)

// What the model is told, end to end through the real daemon, agent runner,
// SDK and claude CLI: a non-main group's system prompt holds the global
// memory (groups/global/CLAUDE.md), and the persona that `groups add`
// wrote into the group's CLAUDE.md reaches the model with it.
func TestPersonaAndGlobalMemoryReachTheModel(t *testing.T) {
	w := newWorld(t) // skips without agent-runner/node_modules or bwrap
	mock := mockapi.New(t)
	mock.Script("PERSONA-PROBE", mockapi.Text("Hello from Andy."))
	in := newDaemonInstall(t, w, mock.URL)
	dumpOnFailure(t, w, mock)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	global := "GLOBAL-MEMORY-" + randHex(t, 8)
	if err := os.MkdirAll(filepath.Join(w.groups, "global"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.groups, "global", "CLAUDE.md"), "The owner is called Sam. "+global+"\n", 0o644)
	in.Start()
	in.Post("local:family", "Eve", "PERSONA-PROBE who are you?")
	in.WaitFor("local:family", e2e.Equals("Hello from Andy."))

	persona, err := os.ReadFile(filepath.Join(w.groupDir("family"), "CLAUDE.md"))
	if err != nil || !strings.Contains(string(persona), "You are Andy") {
		t.Fatalf("groups add wrote no persona: %v\n%s", err, persona)
	}
	var found bool
	for _, body := range mock.Requests() {
		if !strings.Contains(string(body), "PERSONA-PROBE") {
			continue
		}
		var req struct {
			System   json.RawMessage `json:"system"`
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		found = true
		var system any
		json.Unmarshal(req.System, &system)
		sys, _ := json.Marshal(system)
		if !strings.Contains(string(sys), global) || !strings.Contains(string(sys), "Global memory") {
			t.Errorf("the global memory is not in the system prompt:\n%s", sys)
		}
		// Claude Code hands the project's CLAUDE.md to the model as context
		// beside the conversation; either way it is in the request.
		if !strings.Contains(string(body), "You are Andy, a personal assistant in the WhatsApp chat") ||
			!strings.Contains(string(body), "*bold* (single asterisks)") {
			t.Error("the persona (the group's CLAUDE.md) did not reach the model")
		}
		break
	}
	if !found {
		t.Fatal("no request of the family agent reached the mock")
	}
}
