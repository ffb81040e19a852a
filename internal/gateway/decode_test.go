package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// acceptAll is what the SDK asks for; set by hand, Go's client neither adds
// its own nor decodes, so the test reads exactly what the agent gets.
const acceptAll = "gzip, deflate, br, zstd"

// An upstream that compresses although the relay asked for identity, as a
// gateway in front of the API may: every encoding, streamed and not, is
// counted to the token, and the agent gets the answer decoded and whole,
// without a Content-Encoding that no longer holds. (Before the relay
// decoded, a gzip answer recorded no usage at all.)
func TestRelayMetersCompressedAnswers(t *testing.T) {
	mock := mockapi.New(t)
	want := Tokens{Input: 1000, Output: 500, CacheWrite: 200, CacheRead: 3000}
	mock.SetUsage(mockapi.Usage{Input: 1000, Output: 500, CacheWrite: 200, CacheRead: 3000})
	for _, enc := range mockapi.Encodings {
		for _, streamed := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", enc, streamed), func(t *testing.T) {
				mock.SetEncoding(enc)
				m := &meter{}
				resp, body := postCompressed(t, Config{Upstream: mock.URL, Meter: m},
					fmt.Sprintf(`{"model":"m","stream":%v,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"notes"}]}`, streamed))
				log := mock.Log()
				up := log[len(log)-1]
				if got := up.Header.Get("Accept-Encoding"); got != "identity" || up.Encoding != enc {
					t.Fatalf("the relay asked for %q and the mock answered %q: the decoding is not what is tested", got, up.Encoding)
				}
				if ce := resp.Header.Get("Content-Encoding"); ce != "" {
					t.Errorf("the agent got Content-Encoding %q on a decoded body", ce)
				}
				if streamed && !strings.Contains(string(body), `"text":"ok"`) || !streamed && !json.Valid(body) {
					t.Errorf("the agent got no valid answer: %q", body)
				}
				if _, done := m.calls(); len(done) != 1 || done[0] != want {
					t.Errorf("counted %+v, want %+v", done, want)
				}
			})
		}
	}
	mock.SetEncoding("br")
	mock.Fail(400, "invalid_request_error", "max_tokens is too large", "")
	if resp, body := postCompressed(t, Config{Upstream: mock.URL}, `{}`); resp.StatusCode != 400 || !strings.Contains(string(body), "max_tokens is too large") {
		t.Errorf("a compressed API error reached the agent as %d %q", resp.StatusCode, body)
	}
}

// A compressed event stream still streams: the agent reads message_start
// decoded while the upstream holds back the rest.
func TestRelayStreamsACompressedAnswer(t *testing.T) {
	for _, enc := range mockapi.Encodings {
		t.Run(enc, func(t *testing.T) {
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.Header().Set("Content-Encoding", enc)
				z := mockapi.NewEncoder(enc, w)
				defer z.Close()
				fmt.Fprint(z, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":11,\"output_tokens\":1}}}\n\n")
				z.Flush()
				w.(http.Flusher).Flush()
				<-release
				fmt.Fprint(z, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":44}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			}))
			defer up.Close()
			m := &meter{}
			resp, err := sendCompressed(t, Config{Upstream: up.URL, Meter: m}, `{"stream":true}`)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			first, err := br.ReadString('\n')
			close(release)
			if err != nil || first != "event: message_start\n" {
				t.Fatalf("first line %q, %v", first, err)
			}
			rest, err := io.ReadAll(br)
			if err != nil || !strings.HasSuffix(string(rest), "data: {\"type\":\"message_stop\"}\n\n") {
				t.Fatalf("rest %q, %v", rest, err)
			}
			if _, done := m.calls(); len(done) != 1 || done[0] != (Tokens{Input: 11, Output: 44}) {
				t.Errorf("counted %+v", done)
			}
		})
	}
}

// An encoding the relay cannot read goes to the agent as it came, with
// its header, rather than as bytes nobody can read.
func TestRelayPassesAnUnknownEncoding(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "x-squeeze")
		w.Write([]byte("squeezed"))
	}))
	defer up.Close()
	if resp, body := postCompressed(t, Config{Upstream: up.URL, Meter: &meter{}}, `{}`); resp.Header.Get("Content-Encoding") != "x-squeeze" || string(body) != "squeezed" {
		t.Errorf("got %q %q", resp.Header.Get("Content-Encoding"), body)
	}
}

// sendCompressed sends body through a new gateway of cfg (group family,
// with a credential) as the SDK does, accepting every encoding.
func sendCompressed(t *testing.T, cfg Config, body string) (*http.Response, error) {
	t.Helper()
	cfg.Group, cfg.Secrets = "family", map[string]string{"ANTHROPIC_API_KEY": "sk-real"}
	run, client := open(t, cfg)
	req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
	req.Header.Set("Accept-Encoding", acceptAll)
	return client.Do(req)
}

// postCompressed is sendCompressed, the answer read whole.
func postCompressed(t *testing.T, cfg Config, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := sendCompressed(t, cfg, body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}
