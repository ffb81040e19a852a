package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// A secret-looking name of agent.env enters a confined group only when its
// override lists it in env; a name there that agent.env lacks is an error
// naming agent.env; `security show` says what enters and what is held back.
func TestOverrideEnvAndShow(t *testing.T) {
	dir, cfg := newInstall(t) // agent.env: ANTHROPIC_API_KEY, GH_TOKEN
	mustCLI(t, dir, "--config", cfg, "groups", "add", "--jid", "local:family", "--name", "Family", "--folder", "family")

	var eff struct {
		Env struct {
			Enter, HeldBack []struct{ Name, Why string }
		} `json:"env"`
	}
	show := func() string {
		out := mustCLI(t, dir, "--config", cfg, "security", "show", "family", "--json")
		eff.Env.Enter, eff.Env.HeldBack = nil, nil
		if err := json.Unmarshal([]byte(out), &eff); err != nil {
			t.Fatal(err)
		}
		return out
	}
	show()
	if len(eff.Env.HeldBack) != 1 || eff.Env.HeldBack[0].Name != "GH_TOKEN" || !strings.Contains(eff.Env.HeldBack[0].Why, "looks like a secret") ||
		len(eff.Env.Enter) != 1 || eff.Env.Enter[0].Name != "ANTHROPIC_API_KEY" || !strings.Contains(eff.Env.Enter[0].Why, "placeholder") {
		t.Errorf("env without an override: %+v", eff.Env)
	}
	text := mustCLI(t, dir, "--config", cfg, "security", "show", "family")
	if !strings.Contains(text, "agent.env held back:\n  GH_TOKEN  (looks like a secret (TOKEN)") {
		t.Errorf("text show:\n%s", text)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\n  \"env\": [\"GH_TOKEN\", \"AWS_SECRET\"]\n}"), 0o600)
	_, errs, code := e2e.Run(t, dir, nil, "groups", "set-security", "family", "--file", bad, "--config", cfg)
	if code == 0 || !strings.Contains(errs, bad+`:2:23: env[1]: "AWS_SECRET" is not in agent.env of `+cfg) {
		t.Fatalf("an env name agent.env lacks: exit %d, %s", code, errs)
	}

	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"env": ["GH_TOKEN"]}`), 0o600)
	mustCLI(t, dir, "--config", cfg, "groups", "set-security", "family", "--file", good)
	show()
	if len(eff.Env.HeldBack) != 0 || len(eff.Env.Enter) != 2 || eff.Env.Enter[1].Name != "GH_TOKEN" || !strings.Contains(eff.Env.Enter[1].Why, "override") {
		t.Errorf("env with GH_TOKEN let in: %+v", eff.Env)
	}

	// Not a key of the global policy: it is per group.
	os.WriteFile(cfg, []byte(`{"dataDir": "state", "groupsDir": "g", "hostSecurity": {"env": ["GH_TOKEN"]}}`), 0o600)
	failCLI(t, dir, "hostSecurity.env: which secrets of agent.env may enter confined runs is set per group", "--config", cfg, "config", "check")
}
