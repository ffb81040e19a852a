package e2e_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// lastKey is the X-Api-Key of the last request s received.
func lastKey(t *testing.T, s *mockapi.Server) string {
	t.Helper()
	log := s.Log()
	if len(log) == 0 {
		t.Fatal("the model API got no request")
	}
	return log[len(log)-1].Header.Get("X-Api-Key")
}

// The key lives in nanoclawd.env, with nothing of it in the daemon's
// environment: it is read before the config (whose metrics token comes
// from it too), and a new key written there while the daemon runs is the
// one the next run sends, with no restart; status and doctor show the
// key the running daemon uses.
func TestKeyInEnvFileWithoutARestart(t *testing.T) {
	mock := mockapi.New(t)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "env": ["ANTHROPIC_API_KEY"]`,
		Top:   `"console": {"listen": "127.0.0.1:0", "metricsToken": "${NANOCLAWD_TEST_METRICS}"}`,
		Env:   []string{"ANTHROPIC_BASE_URL=" + mock.URL},
		Home:  t.TempDir(),
	})
	envFile := filepath.Join(in.Dir, "nanoclawd.env")
	key1, key2 := "sk-ant-api03-one-"+randHex(t), "sk-ant-api03-two-"+randHex(t)
	write := func(key string) {
		t.Helper()
		// As setup saves it: a new file renamed over the old.
		if err := atomicfile.Write(envFile, []byte("NANOCLAWD_TEST_METRICS=m-"+key+"\nANTHROPIC_API_KEY="+key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(key1)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()

	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", apiOK)
	if got := lastKey(t, mock); got != key1 {
		t.Fatalf("the model API got the key %q, want the one in nanoclawd.env", got)
	}
	rep := statusUntil(t, in, "the key from nanoclawd.env", func(r status.Report) bool { return r.Credential.Name != "" })
	if c := rep.Credential; c.Name != "ANTHROPIC_API_KEY" || !c.FromEnvFile || c.Fingerprint != security.Fingerprint(key1) {
		t.Errorf("status shows the credential %+v", c)
	}
	if rep.Console == nil || rep.Console.URL == "" {
		t.Fatalf("no console: %+v", rep.Console)
	}
	req, _ := http.NewRequest("GET", rep.Console.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer m-"+key1)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("/metrics with the token from nanoclawd.env: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	write(key2)
	statusUntil(t, in, "the new key", func(r status.Report) bool { return r.Credential.Fingerprint == security.Fingerprint(key2) })
	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", nth(2, apiOK))
	if got := lastKey(t, mock); got != key2 {
		t.Errorf("after the edit the model API got %q, want the new key", got)
	}
	if text := in.CLI("status"); !strings.Contains(text, "ANTHROPIC_API_KEY from nanoclawd.env (fingerprint "+security.Fingerprint(key2)+")") {
		t.Errorf("status text does not name the key in use:\n%s", text)
	}
	doc, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config)
	if !strings.Contains(doc, "the running daemon (PID") || !strings.Contains(doc, security.Fingerprint(key2)+"), the same as here") {
		t.Errorf("doctor does not report the key the running daemon uses:\n%s", doc)
	}
}

// A provider with an empty credential (a local model server) needs no
// ANTHROPIC_API_KEY anywhere: a confined group and the main group are
// answered through it, it gets no credential, and doctor asks for none.
func TestKeylessProviderAnswers(t *testing.T) {
	local := mockapi.New(t)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "provider": "local"`,
		Top:   `"providers": {"local": {"url": ` + e2e.Quote(local.URL) + `, "credential": ""}}`,
		Home:  t.TempDir(),
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	for _, chat := range []string{"local:family", "local:main"} {
		in.Post(chat, "Ann", "api 1")
		in.WaitFor(chat, apiOK)
	}
	for _, r := range local.Log() {
		if k, a := r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"); k != "" || a != "" {
			t.Errorf("the keyless provider was sent X-Api-Key %q, Authorization %q", k, a)
		}
	}
	if len(local.Log()) != 2 {
		t.Errorf("the provider got %d requests, want 2", len(local.Log()))
	}
	doc, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config)
	if !strings.Contains(doc, "ok   credentials: none needed") {
		t.Errorf("doctor asks for a credential no group needs:\n%s", doc)
	}
	for _, e := range in.Env {
		if strings.HasPrefix(e, "ANTHROPIC_API_KEY=") {
			t.Fatalf("the daemon has %s", e)
		}
	}
	if _, err := os.Stat(filepath.Join(in.Dir, "nanoclawd.env")); err == nil {
		t.Fatal("a nanoclawd.env exists")
	}
}
