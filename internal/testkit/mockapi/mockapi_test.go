package mockapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// post sends a Messages request with the given conversation and returns the
// decoded SSE events (name and data) of the answer.
func post(t *testing.T, s *Server, path string, body any) (*http.Response, []sse) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []sse
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		var cur sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				cur.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data); err != nil {
					t.Fatalf("event %s: data is not JSON: %v", cur.name, err)
				}
			case line == "":
				events = append(events, cur)
				cur = sse{}
			}
		}
	} else {
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		events = append(events, sse{name: "json", data: v})
	}
	return resp, events
}

type sse struct {
	name string
	data map[string]any
}

func conversation(first string, assistantTurns int) map[string]any {
	msgs := []map[string]any{{"role": "user", "content": first}}
	for i := 0; i < assistantTurns; i++ {
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "…"}, map[string]any{"role": "user", "content": "result"})
	}
	return map[string]any{"model": "m", "stream": true, "messages": msgs, "tools": []any{map[string]any{"name": "Bash"}}}
}

func TestStreamsScriptedToolUseLikeTheAPI(t *testing.T) {
	s := New(t)
	s.Script("", Tool("Bash", map[string]any{"command": "ls"}), Text("done listing"))

	_, ev := post(t, s, "/v1/messages", conversation("hi", 0))
	var names []string
	for _, e := range ev {
		names = append(names, e.name)
	}
	want := "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events = %s, want %s", got, want)
	}
	block := ev[2].data["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "Bash" || !strings.HasPrefix(block["id"].(string), "toolu_") {
		t.Errorf("content_block_start = %v", block)
	}
	delta := ev[3].data["delta"].(map[string]any)
	if delta["type"] != "input_json_delta" || delta["partial_json"] != `{"command":"ls"}` {
		t.Errorf("delta = %v", delta)
	}
	if sr := ev[5].data["delta"].(map[string]any)["stop_reason"]; sr != "tool_use" {
		t.Errorf("stop_reason = %v, want tool_use", sr)
	}

	// The next step of the conversation gets the next turn; past the end, "done".
	_, ev = post(t, s, "/v1/messages", conversation("hi", 1))
	if d := ev[3].data["delta"].(map[string]any); d["text"] != "done listing" {
		t.Errorf("step 1 text = %v", d)
	}
	_, ev = post(t, s, "/v1/messages", conversation("hi", 5))
	if d := ev[3].data["delta"].(map[string]any); d["text"] != "done" {
		t.Errorf("past the script: text = %v", d)
	}
}

func TestKeyedScriptsAndSideRequests(t *testing.T) {
	s := New(t)
	s.Script("", Text("default"))
	s.Script("GROUP-B", Text("for b"))

	_, ev := post(t, s, "/v1/messages", conversation("<messages>GROUP-B asks</messages>", 0))
	if d := ev[3].data["delta"].(map[string]any); d["text"] != "for b" {
		t.Errorf("keyed script: %v", d)
	}
	_, ev = post(t, s, "/v1/messages", conversation("anyone else", 0))
	if d := ev[3].data["delta"].(map[string]any); d["text"] != "default" {
		t.Errorf("default script: %v", d)
	}

	// A request without tools (a title or summary) is answered without
	// consuming the script, and non-streaming requests get a JSON message.
	_, ev = post(t, s, "/v1/messages", map[string]any{"model": "small", "messages": []any{map[string]any{"role": "user", "content": "title?"}}})
	if ev[0].name != "json" || ev[0].data["type"] != "message" || ev[0].data["stop_reason"] != "end_turn" {
		t.Errorf("side request answer = %v", ev[0].data)
	}
	_, ev = post(t, s, "/v1/messages/count_tokens", map[string]any{"model": "m", "messages": []any{}})
	if _, ok := ev[0].data["input_tokens"]; !ok {
		t.Errorf("count_tokens answer = %v", ev[0].data)
	}
	resp, _ := post(t, s, "/v1/other", map[string]any{})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: status %d, want 404", resp.StatusCode)
	}
	if n := len(s.Requests()); n != 5 {
		t.Errorf("recorded %d requests, want 5", n)
	}
}

func TestContainsFindsSecretsAsJSONCarriesThem(t *testing.T) {
	s := New(t)
	secret := "line1\n\"quoted\" <tag>"
	if s.Contains(secret) {
		t.Fatal("empty log contains the secret")
	}
	post(t, s, "/v1/messages", conversation("tool said: "+secret, 0))
	if !s.Contains(secret) {
		t.Error("secret inside a JSON string (Go escaping) was not found")
	}
	// The claude CLI is JavaScript: JSON.stringify leaves < and > alone.
	other := New(t)
	body := `{"model":"m","messages":[{"role":"user","content":"line1\n\"quoted\" <tag>"}]}`
	resp, err := http.Post(other.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !other.Contains(secret) {
		t.Error("secret inside a JSON string (JavaScript escaping) was not found")
	}
}

// Fail answers every Messages request with the API's error shape until it
// is cleared; every request is still recorded.
func TestFail(t *testing.T) {
	s := New(t)
	req := map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}, "tools": []any{map[string]any{}}}
	s.Fail(http.StatusUnauthorized, "authentication_error", "invalid x-api-key", "")
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		resp, events := post(t, s, path, req)
		if resp.StatusCode != http.StatusUnauthorized || len(events) != 1 || events[0].name != "json" ||
			events[0].data["error"].(map[string]any)["type"] != "authentication_error" {
			t.Errorf("%s while failing: %s, %+v", path, resp.Status, events)
		}
	}
	s.Fail(0, "", "", "")
	if resp, events := post(t, s, "/v1/messages", req); resp.StatusCode != http.StatusOK || len(events) == 0 || events[0].name != "message_start" {
		t.Errorf("after Fail(0): %s, %d events", resp.Status, len(events))
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests recorded, want 3", n)
	}
}
