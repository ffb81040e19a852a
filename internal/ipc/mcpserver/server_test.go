package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

func init() { VerdictWait = 200 * time.Millisecond } // no daemon answers here

// The daemon's answer reaches the agent: carried out, or refused with the
// reason (whether a group may send somewhere is the daemon's to decide).
func TestToolsReportTheDaemonsVerdict(t *testing.T) {
	cs, dir := connect(t, false)
	answer := func(v protocol.Verdict) {
		go func() {
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				entries, _ := os.ReadDir(filepath.Join(dir, layout.MessagesDir))
				for _, e := range entries {
					if !strings.HasSuffix(e.Name(), ".json") {
						continue // not renamed into place yet
					}
					data, _ := json.Marshal(v)
					os.WriteFile(filepath.Join(dir, layout.ResultsDir, e.Name()), data, 0o600)
					os.Remove(filepath.Join(dir, layout.MessagesDir, e.Name()))
					return
				}
			}
		}()
	}
	old := VerdictWait
	VerdictWait = 5 * time.Second
	defer func() { VerdictWait = old }()
	answer(protocol.Verdict{Status: "refused", Reason: "group family may only send to its own chat"})
	if out, isErr := call(t, cs, "send_message", map[string]any{"text": "x", "chatJid": "work@g.us"}); !isErr || !strings.Contains(out, "refused: group family may only send to its own chat") {
		t.Errorf("refused: %q (error=%v)", out, isErr)
	}
	answer(protocol.Verdict{Status: "sent"})
	if out, isErr := call(t, cs, "send_message", map[string]any{"text": "x"}); isErr || out != "Message sent." {
		t.Errorf("sent: %q (error=%v)", out, isErr)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, layout.ResultsDir)); len(entries) != 0 {
		t.Errorf("answers left behind: %v", entries)
	}
}

// connect runs the real server (Run, reading the environment) over a pair
// of pipes and returns a go-sdk client session on the other ends.
func connect(t *testing.T, isMain bool) (*mcp.ClientSession, string) {
	t.Helper()
	ipcDir := filepath.Join(t.TempDir(), "ipc", "family")
	for _, d := range []string{layout.MessagesDir, layout.TasksDir} {
		os.MkdirAll(filepath.Join(ipcDir, d), 0o700)
	}
	t.Setenv("NANOCLAW_IPC_DIR", ipcDir)
	t.Setenv("NANOCLAW_IPC_TOKEN", "tok-123")
	t.Setenv("NANOCLAW_GROUP_FOLDER", "family")
	t.Setenv("NANOCLAW_CHAT_JID", "family@g.us")
	main := "0"
	if isMain {
		main = "1"
	}
	t.Setenv("NANOCLAW_IS_MAIN", main)

	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, serverIn, serverOut) }()
	client := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		clientOut.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return cs, ipcDir
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// written returns the one IPC file in dir, decoded by the daemon's decoder.
func written(t *testing.T, dir string) protocol.Request {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".json") {
		t.Fatalf("%s holds %v; want one .json file (no .tmp left)", dir, entries)
	}
	path := filepath.Join(dir, entries[0].Name())
	data, _ := os.ReadFile(path)
	os.Remove(path)
	req, err := protocol.DecodeRequest(data, scheduler.Validate)
	if err != nil {
		t.Fatalf("daemon would refuse %s: %v", data, err)
	}
	if req.Token != "tok-123" {
		t.Fatalf("token %q", req.Token)
	}
	return req
}

func TestToolsWriteValidIPCFiles(t *testing.T) {
	cs, dir := connect(t, false)
	msgs, tasks := filepath.Join(dir, layout.MessagesDir), filepath.Join(dir, layout.TasksDir)

	if out, isErr := call(t, cs, "send_message", map[string]any{"text": "hello"}); isErr {
		t.Fatal(out)
	}
	if r := written(t, msgs); r.Type != protocol.TypeMessage || r.ChatJID != "family@g.us" || r.Text != "hello" {
		t.Fatalf("%+v", r)
	}
	// The file is passed on as given: the daemon, not the tool, checks it.
	if out, isErr := call(t, cs, "send_message", map[string]any{"text": "the chart", "file": "out/chart.png"}); isErr {
		t.Fatal(out)
	}
	if r := written(t, msgs); r.Type != protocol.TypeMessage || r.Text != "the chart" || r.File != "out/chart.png" {
		t.Fatalf("%+v", r)
	}
	if out, isErr := call(t, cs, "react", map[string]any{"message_id": "3EB0C4A1F2", "emoji": "👍"}); isErr {
		t.Fatal(out)
	}
	if r := written(t, msgs); r.Type != protocol.TypeReaction || r.ChatJID != "family@g.us" || r.MessageID != "3EB0C4A1F2" || r.Emoji != "👍" {
		t.Fatalf("%+v", r)
	}
	if out, isErr := call(t, cs, "schedule_task", map[string]any{"prompt": "p", "schedule_type": "cron", "schedule_value": "0 9 * * *"}); isErr {
		t.Fatal(out)
	}
	if r := written(t, tasks); r.Type != protocol.TypeScheduleTask || r.ContextMode != "group" || r.ScheduleValue != "0 9 * * *" {
		t.Fatalf("%+v", r)
	}
	for _, op := range []string{"pause_task", "resume_task", "cancel_task"} {
		if out, isErr := call(t, cs, op, map[string]any{"task_id": "task-1"}); isErr {
			t.Fatal(out)
		}
		if r := written(t, tasks); r.Type != op || r.TaskID != "task-1" {
			t.Fatalf("%+v", r)
		}
	}
	if out, isErr := call(t, cs, "update_task", map[string]any{"task_id": "task-1", "prompt": "new"}); isErr {
		t.Fatal(out)
	}
	if r := written(t, tasks); r.Type != protocol.TypeUpdateTask || r.Prompt != "new" {
		t.Fatalf("%+v", r)
	}
}

func TestInvalidInputIsRefusedWithAHint(t *testing.T) {
	cs, dir := connect(t, false)
	tests := []struct {
		tool string
		args map[string]any
		hint string
	}{
		{"send_message", map[string]any{"text": " "}, "text is empty"},
		{"react", map[string]any{"message_id": "3EB0", "emoji": " "}, "give message_id"},
		{"react", map[string]any{"message_id": "3EB0 x", "emoji": "👍"}, "no spaces"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_type": "cron", "schedule_value": "every morning"}, "5 fields"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_type": "interval", "schedule_value": "1h"}, "milliseconds"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_type": "once", "schedule_value": "tomorrow"}, "YYYY-MM-DDTHH:MM:SS"},
		{"schedule_task", map[string]any{"prompt": "p", "schedule_type": "once", "schedule_value": "2030-01-01T09:00:00", "context_mode": "shared"}, "group or isolated"},
		{"update_task", map[string]any{"task_id": "t"}, "nothing to update"},
		{"update_task", map[string]any{"task_id": "t", "schedule_type": "cron"}, "schedule_value together"},
		{"pause_task", map[string]any{"task_id": ""}, "taskId"},
		{"send_message", map[string]any{"text": strings.Repeat("x", protocol.MaxFileSize)}, "over the limit"},
	}
	for _, tc := range tests {
		out, isErr := call(t, cs, tc.tool, tc.args)
		if !isErr || !strings.Contains(out, tc.hint) {
			t.Errorf("%s %v: %q (error=%v); want an error mentioning %q", tc.tool, tc.args, out, isErr, tc.hint)
		}
	}
	for _, d := range []string{layout.MessagesDir, layout.TasksDir} {
		if entries, _ := os.ReadDir(filepath.Join(dir, d)); len(entries) != 0 {
			t.Fatalf("refused calls wrote %v", entries)
		}
	}
}

func TestRegisterGroupIsForMainOnly(t *testing.T) {
	names := func(cs *mcp.ClientSession) map[string]bool {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, tool := range res.Tools {
			got[tool.Name] = true
		}
		return got
	}
	cs, _ := connect(t, false)
	if n := names(cs); n["register_group"] || !n["send_message"] || len(n) != 9 {
		t.Fatalf("non-main tools %v", n)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "register_group",
		Arguments: map[string]any{"jid": "x@g.us", "name": "X", "folder": "x"}})
	if err == nil && !res.IsError {
		t.Fatal("non-main called register_group")
	}

	cs, dir := connect(t, true)
	if n := names(cs); !n["register_group"] || len(n) != 10 {
		t.Fatalf("main tools %v", n)
	}
	out, isErr := call(t, cs, "register_group", map[string]any{"jid": "x@g.us", "name": "X", "folder": "../x"})
	if !isErr || !strings.Contains(out, "letters, digits") {
		t.Fatalf("path trick: %q", out)
	}
	if out, isErr := call(t, cs, "register_group", map[string]any{"jid": "x@g.us", "name": "X", "folder": "x", "requiresTrigger": false}); isErr {
		t.Fatal(out)
	}
	r := written(t, filepath.Join(dir, layout.TasksDir))
	if r.Folder != "x" || r.RequiresTrigger == nil || *r.RequiresTrigger {
		t.Fatalf("%+v", r)
	}
	if out, isErr := call(t, cs, "send_message", map[string]any{"text": "hi", "chatJid": "work@g.us"}); isErr {
		t.Fatalf("main may message any chat: %s", out)
	}
}

func TestListTasksReadsTheSnapshot(t *testing.T) {
	cs, dir := connect(t, false)
	if out, _ := call(t, cs, "list_tasks", nil); out != "No scheduled tasks." {
		t.Fatalf("%q", out)
	}
	os.WriteFile(layout.IPCDir(dir).TasksSnapshot(), []byte(`[{"id":"task-9","groupFolder":"family","prompt":"water plants",
		"schedule_type":"cron","schedule_value":"0 9 * * *","status":"active","next_run":"2030-01-01T09:00:00Z"}]`), 0o600)
	out, isErr := call(t, cs, "list_tasks", nil)
	if isErr || !strings.Contains(out, "task-9") || !strings.Contains(out, "water plants") {
		t.Fatalf("%q", out)
	}
}

func TestRunWithoutEnvironmentSaysWhy(t *testing.T) {
	t.Setenv("NANOCLAW_IPC_TOKEN", "")
	err := Run(context.Background(), strings.NewReader(""), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "NANOCLAW_IPC_TOKEN") {
		t.Fatalf("%v", err)
	}
}

// search_history writes a search_history file into tasks/ (limit as a
// string, like every IPC field) and lists the daemon's answer.
func TestSearchHistoryTool(t *testing.T) {
	cs, dir := connect(t, false)
	old := VerdictWait
	VerdictWait = 5 * time.Second
	defer func() { VerdictWait = old }()
	got := make(chan protocol.Request, 1)
	go func() {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			entries, _ := os.ReadDir(filepath.Join(dir, layout.TasksDir))
			for _, e := range entries {
				if !strings.HasSuffix(e.Name(), ".json") {
					continue
				}
				data, _ := os.ReadFile(filepath.Join(dir, layout.TasksDir, e.Name()))
				req, _ := protocol.DecodeRequest(data, nil)
				got <- req
				found := []protocol.Found{{ID: "m17", ChatJID: "family@g.us", Sender: "ann@local", SenderName: "Ann",
					Time: "2026-03-01T09:00:00Z", Text: "the plumber is Jonas"}}
				v, _ := json.Marshal(protocol.Verdict{Status: "ok", Messages: &found})
				os.WriteFile(filepath.Join(dir, layout.ResultsDir, e.Name()), v, 0o600)
				os.Remove(filepath.Join(dir, layout.TasksDir, e.Name()))
				return
			}
		}
	}()
	out, isErr := call(t, cs, "search_history", map[string]any{"query": "plumber", "since": "2026-03-01", "limit": 5})
	if isErr || !strings.Contains(out, "1 messages") || !strings.Contains(out, "Ann (ann@local)") || !strings.Contains(out, "id m17: the plumber is Jonas") {
		t.Errorf("answer %q (error=%v)", out, isErr)
	}
	req := <-got
	if req.Type != protocol.TypeSearchHistory || req.Query != "plumber" || req.Limit != "5" || req.Since != "2026-03-01" || req.Token != "tok-123" {
		t.Errorf("request %+v", req)
	}
	if out, isErr := call(t, cs, "search_history", map[string]any{"query": "x", "limit": 500}); !isErr || !strings.Contains(out, "limit") {
		t.Errorf("limit 500: %q (error=%v)", out, isErr)
	}
}
