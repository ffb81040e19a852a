package gateway

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// The relay forwards the Messages API and nothing else, even with this
// run's own placeholder; every refusal is audited, and only allow-listed
// headers reach the upstream.
func TestRelayForwardsOnlyTheModelAPI(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var headers http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		headers = r.Header.Clone()
		mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	defer up.Close()
	rep := &reports{}
	run, client := open(t, Config{Group: "family", Upstream: up.URL, Self: "127.0.0.1:3128", Reporter: rep,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}})
	ph := run.Env()["ANTHROPIC_API_KEY"]
	do := func(method, url string) int {
		req, _ := http.NewRequest(method, url, strings.NewReader("{}"))
		req.Header.Set("X-Api-Key", ph)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("X-Stainless-Lang", "js")
		req.Header.Set("Cookie", "session=owner")
		req.Header.Set("X-Forwarded-For", "10.0.0.1")
		req.Header.Set("X-Target-Host", "files.internal")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	base := "http://127.0.0.1:3128"
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"POST", "/v1/messages", 200},
		{"POST", "/v1/messages?beta=true", 200},
		{"POST", "/v1/messages/count_tokens?beta=true", 200},
		{"GET", "/v1/files", 403},
		{"POST", "/v1/files", 403},
		{"DELETE", "/v1/files/file_123", 403},
		{"POST", "/v1/messages/batches", 403},
		{"GET", "/v1/messages/batches/b1/results", 403},
		{"GET", "/v1/models", 403},
		{"GET", "/v1/messages", 403},
		{"POST", "/v1/organizations/api_keys", 403},
		{"POST", "/v1/messages/../files", 403},
		{"POST", "/v1/messages?beta=true&redirect=x", 403},
	} {
		if got := do(c.method, base+c.path); got != c.want {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, got, c.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"POST /v1/messages", "POST /v1/messages?beta=true", "POST /v1/messages/count_tokens?beta=true"}; strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("upstream saw %q, want %q", seen, want)
	}
	for _, h := range []string{"Cookie", "X-Forwarded-For", "X-Target-Host"} {
		if headers.Get(h) != "" {
			t.Errorf("header %s reached the upstream: %q", h, headers.Get(h))
		}
	}
	if headers.Get("Anthropic-Version") == "" || headers.Get("X-Stainless-Lang") == "" || headers.Get("X-Api-Key") != "sk-real" {
		t.Errorf("the model API's own headers were not relayed: %v", headers)
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.vs) != 10 {
		t.Fatalf("%d refusals audited, want 10: %+v", len(rep.vs), rep.vs)
	}
	for _, v := range rep.vs {
		if v.Kind != "network" || v.Group != "family" || v.Action != "blocked" || !strings.Contains(v.Detail, "relay") {
			t.Errorf("audited as %+v", v)
		}
	}
	if rep.vs[0].Target != "GET /v1/files" {
		t.Errorf("first refusal names %q", rep.vs[0].Target)
	}
}

// An upstream that cannot be reached is an error the SDK does not retry
// (every upstream failed: a 400 naming the failure) and a line in the
// daemon's own log, never a raw "http: proxy error" line of the standard
// library's logger on stderr.
func TestRelayErrorInTheDaemonsLog(t *testing.T) {
	var std bytes.Buffer
	log.SetOutput(&std)
	defer log.SetOutput(os.Stderr)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := "http://" + ln.Addr().String()
	ln.Close()
	var ours bytes.Buffer
	run, client := open(t, Config{Group: "family", Upstream: closed, Self: "127.0.0.1:3128", Reporter: &reports{},
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}, Log: zerolog.New(&ours)})
	req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader("{}"))
	req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
	if std.Len() > 0 {
		t.Errorf("the standard logger wrote: %q", std.String())
	}
	if !strings.Contains(ours.String(), `"level":"warn"`) || !strings.Contains(ours.String(), "connection refused") {
		t.Errorf("the daemon's log lacks the failure: %q", ours.String())
	}
}
