package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

type reports struct {
	mu sync.Mutex
	vs []security.Violation
}

func (r *reports) Report(_ context.Context, v security.Violation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vs = append(r.vs, v)
	return nil
}

func open(t testing.TB, cfg Config) (*Gateway, *http.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "g.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Serve(ln, sock, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	return r, client
}

// The relay hands the upstream the real key in place of the run's
// placeholder, streams the answer, and refuses any other key, including
// this run's once the run has ended.
func TestRelaySwapsThePlaceholder(t *testing.T) {
	var gotKey, gotPath string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotPath = r.Header.Get("X-Api-Key"), r.URL.Path
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\n\n")
	}))
	defer up.Close()
	run, client := open(t, Config{Group: "family", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}})
	ph := run.Env()["ANTHROPIC_API_KEY"]
	if ph == "" || strings.Contains(ph, "sk-real") {
		t.Fatalf("placeholder %q", ph)
	}
	post := func(key string) *http.Response {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader("{}"))
		req.Header.Set("X-Api-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post(ph)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || gotKey != "sk-real" || gotPath != "/v1/messages" || !strings.Contains(string(body), "message_start") {
		t.Fatalf("relay: %d %q, upstream saw key %q path %q", resp.StatusCode, body, gotKey, gotPath)
	}
	gotKey = ""
	if resp := post("sk-guess"); resp.StatusCode != http.StatusUnauthorized || gotKey != "" || !isAPIError(resp) {
		t.Errorf("a key that is no placeholder: %d, upstream saw %q", resp.StatusCode, gotKey)
	}
	other, _ := open(t, Config{Group: "work", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}})
	other.Close()
	if resp := post(other.Env()["ANTHROPIC_API_KEY"]); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another run's placeholder: %d", resp.StatusCode)
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		rule, host string
		want       bool
	}{
		{"*", "anything.test", true},
		{"example.com", "example.com", true},
		{"example.com", "api.example.com", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"Example.COM.", "example.com", true},
		{"*", "127.0.0.1", false},
		{"*", "::1", false},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.0/8", "127.0.0.2", true},
		{"127.0.0.0/8:5432", "127.0.0.2", true},
		{"192.168.1.0/24", "192.168.2.1", false},
		{"[fd00::1]:8080", "fd00::1", true},
		{"example.com:8443", "example.com", true},
	} {
		if got := Matches(c.rule, c.host); got != c.want {
			t.Errorf("Matches(%q, %q) = %v", c.rule, c.host, got)
		}
	}
}

func isAPIError(resp *http.Response) bool {
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	return e.Type == "error" && strings.Contains(e.Error.Message, "nanoclaw sandbox")
}
