package confine

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// The main group's agent holds placeholders and the relay's address, never
// the daemon's credential.
func TestRelayTakesTheCredential(t *testing.T) {
	spec := &runner.Spec{Env: map[string]string{"PATH": "/bin", "ANTHROPIC_API_KEY": "real-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}}
	gw, err := Relay(Options{Policy: security.Effective{Group: "main"}, Spec: spec, Upstream: "http://127.0.0.1:1", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	for name, v := range spec.Env {
		if strings.Contains(v, "real-key") {
			t.Errorf("%s still holds the real credential", name)
		}
	}
	if ph := spec.Env["ANTHROPIC_API_KEY"]; ph == "" {
		t.Error("no placeholder in place of the credential")
	}
	if got := spec.Env["ANTHROPIC_BASE_URL"]; got != gw.URL() {
		t.Errorf("ANTHROPIC_BASE_URL = %q, want the relay's %q", got, gw.URL())
	}
	if spec.Env["PATH"] != "/bin" {
		t.Error("the rest of the environment changed")
	}
}
