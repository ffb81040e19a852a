package ipc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	tok := `,"token":"t"`
	tests := []struct {
		in   string
		want error // nil = accepted
	}{
		{`{"type":"message","chatJid":"a@g.us","text":"hi"` + tok + `}`, nil},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","file":"media/cat.png"` + tok + `}`, nil},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","file":""` + tok + `}`, ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","file":true` + tok + `}`, ErrField},
		{"{\"type\":\"message\",\"chatJid\":\"a@g.us\",\"text\":\"hi\",\"file\":\"a\\u0000b\"" + tok + "}", ErrField},
		{`{"type":"refresh_groups","file":"x"` + tok + `}`, ErrField},
		{`{"type":"schedule_task","prompt":"p","schedule_type":"once","schedule_value":"2030-01-01T09:00:00","context_mode":"isolated"` + tok + `}`, nil},
		{`{"type":"update_task","taskId":"t1","prompt":"p"` + tok + `}`, nil},
		{`{"type":"update_task","taskId":"t1","schedule_value":"0 9 * * *"` + tok + `}`, nil}, // type taken from the task
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a_b-1","requiresTrigger":false` + tok + `}`, nil},
		{`{"type":"refresh_groups"` + tok + `}`, nil},
		{``, ErrSyntax},
		{`[]`, ErrSyntax},
		{`"x"`, ErrSyntax},
		{`{"type":"refresh_groups"` + tok + `}{}`, ErrSyntax},
		{`{"type":"refresh_groups"` + tok + `,"token":"u"}`, ErrSyntax},
		{`{"type":"refresh_groups","nested":{}` + tok + `}`, ErrSyntax},
		{`{"type":"refresh_groups","n":1` + tok + `}`, ErrSyntax},
		{`{"type":"refresh_groups","token":null}`, ErrSyntax},
		{"{\"type\":\"refresh_groups\",\"token\":\"\xff\"}", ErrSyntax},
		{`{"type":"refresh_groups"}`, ErrNoToken},
		{`{"type":"refresh_groups","token":""}`, ErrNoToken},
		{`{"type":"refresh_groups","token":true}`, ErrNoToken},
		{`{"Type":"refresh_groups"` + tok + `}`, ErrUnknownType},
		{`{"type":"shell"` + tok + `}`, ErrUnknownType},
		{`{"type":"message","chatJid":"a@g.us"` + tok + `}`, ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":""` + tok + `}`, ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":"x","ChatJid":"b@g.us"` + tok + `}`, ErrField},
		{`{"type":"message","chatJid":"a b","text":"x"` + tok + `}`, ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":true` + tok + `}`, ErrField},
		{`{"type":"schedule_task","prompt":"p","schedule_type":"cron","schedule_value":"* *","context_mode":"group"` + tok + `}`, ErrField},
		{`{"type":"schedule_task","prompt":"p","schedule_type":"once","schedule_value":"2030-01-01T09:00:00"` + tok + `}`, ErrField},
		{`{"type":"update_task","taskId":"t1","schedule_type":"cron"` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"../a"` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"GLOBAL"` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","requiresTrigger":"no"` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":["4917012345","4917099999"]` + tok + `}`, nil},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[]` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[""]` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":"4917012345"` + tok + `}`, ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[1]` + tok + `}`, ErrSyntax},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[["x"]]` + tok + `}`, ErrSyntax},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","senders":["x"]` + tok + `}`, ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0C4A1F2","emoji":"👍"` + tok + `}`, nil},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0C4A1F2"` + tok + `}`, ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0","emoji":"👍","text":"x"` + tok + `}`, ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0 x","emoji":"👍"` + tok + `}`, ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0","emoji":"` + strings.Repeat("👍", 20) + `"` + tok + `}`, ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","emoji":"👍"` + tok + `}`, ErrField},
	}
	for _, tc := range tests {
		req, err := Decode([]byte(tc.in))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Decode(%s) = %v; want %v", tc.in, err, tc.want)
		}
		if err == nil && req.Token != "t" {
			t.Errorf("Decode(%s): token %q", tc.in, req.Token)
		}
	}
}

func TestAuthorize(t *testing.T) {
	main := Group{JID: "m@g.us", Folder: "main", IsMain: true}
	fam := Group{JID: "f@g.us", Folder: "family"}
	work := Group{JID: "w@g.us", Folder: "work"}
	tests := []struct {
		name  string
		from  Group
		req   Request
		facts Facts
		ok    bool
		alert bool
	}{
		{"main messages anyone", main, Request{Type: TypeMessage, ChatJID: "x@s.whatsapp.net"}, Facts{}, true, false},
		{"group messages itself", fam, Request{Type: TypeMessage, ChatJID: fam.JID}, Facts{Target: &fam}, true, false},
		{"group messages another", fam, Request{Type: TypeMessage, ChatJID: work.JID}, Facts{Target: &work}, false, true},
		{"group messages unregistered", fam, Request{Type: TypeMessage, ChatJID: "x@g.us"}, Facts{}, false, true},
		{"main reacts anywhere", main, Request{Type: TypeReaction, ChatJID: work.JID}, Facts{Target: &work}, true, false},
		{"group reacts in its chat", fam, Request{Type: TypeReaction, ChatJID: fam.JID}, Facts{Target: &fam}, true, false},
		{"group reacts in another", fam, Request{Type: TypeReaction, ChatJID: work.JID}, Facts{Target: &work}, false, true},
		{"own task", fam, Request{Type: TypeScheduleTask}, Facts{}, true, false},
		{"main schedules for work", main, Request{Type: TypeScheduleTask, TargetJID: work.JID}, Facts{Target: &work}, true, false},
		{"main schedules for unregistered", main, Request{Type: TypeScheduleTask, TargetJID: "x"}, Facts{}, false, false},
		{"group schedules for work", fam, Request{Type: TypeScheduleTask, TargetJID: work.JID}, Facts{Target: &work}, false, true},
		{"group pauses own", fam, Request{Type: TypePauseTask, TaskID: "t"}, Facts{TaskFolder: "family"}, true, false},
		{"group cancels work's", fam, Request{Type: TypeCancelTask, TaskID: "t"}, Facts{TaskFolder: "work"}, false, true},
		{"group updates work's", fam, Request{Type: TypeUpdateTask, TaskID: "t"}, Facts{TaskFolder: "work"}, false, true},
		{"main resumes work's", main, Request{Type: TypeResumeTask, TaskID: "t"}, Facts{TaskFolder: "work"}, true, false},
		{"no such task", main, Request{Type: TypeResumeTask, TaskID: "t"}, Facts{}, false, false},
		{"main registers", main, Request{Type: TypeRegisterGroup, JID: "n@g.us", Folder: "n"}, Facts{}, true, false},
		{"main re-registers same", main, Request{Type: TypeRegisterGroup, JID: "n@g.us", Folder: "n"}, Facts{FolderOwner: "n@g.us"}, true, false},
		{"main takes a used folder", main, Request{Type: TypeRegisterGroup, JID: "n@g.us", Folder: "work"}, Facts{FolderOwner: work.JID}, false, false},
		{"group registers", fam, Request{Type: TypeRegisterGroup, JID: "n@g.us", Folder: "n"}, Facts{}, false, true},
		{"group refreshes", fam, Request{Type: TypeRefreshGroups}, Facts{}, false, true},
		{"unknown", main, Request{Type: "x"}, Facts{}, false, false},
	}
	for _, tc := range tests {
		r := Authorize(tc.from, tc.req, tc.facts)
		if (r == nil) != tc.ok || r != nil && r.Alert != tc.alert {
			t.Errorf("%s: Authorize = %+v; want ok=%v alert=%v", tc.name, r, tc.ok, tc.alert)
		}
	}
}

// FuzzHandle runs the decoder and the authorizer on arbitrary files: they
// must never panic, and nothing they accept from a non-main group may reach
// another group.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		`{"type":"message","chatJid":"w@g.us","text":"hi","token":"t"}`,
		`{"type":"schedule_task","prompt":"p","schedule_type":"cron","schedule_value":"0 9 * * *","context_mode":"group","targetJid":"w@g.us","token":"t"}`,
		`{"type":"cancel_task","taskId":"t1","token":"t"}`,
		`{"type":"update_task","taskId":"t1","schedule_type":"interval","schedule_value":"60000","token":"t"}`,
		`{"type":"register_group","jid":"n@g.us","name":"N","folder":"n","requiresTrigger":true,"token":"t"}`,
		`{"type":"refresh_groups","token":"t"}`,
		`{"type":"message","chatJid":"w@g.us","chatJid":"f@g.us","text":"x","token":"t"}`,
	} {
		f.Add([]byte(s), false, true, "work")
	}
	f.Fuzz(func(t *testing.T, data []byte, isMain, targetKnown bool, taskFolder string) {
		req, err := Decode(data)
		if err != nil {
			return
		}
		if req.Token == "" {
			t.Fatal("accepted a file without a token")
		}
		from := Group{JID: "f@g.us", Folder: "family", IsMain: isMain}
		var facts Facts
		if targetKnown {
			facts.Target = &Group{JID: req.ChatJID + req.TargetJID, Folder: "work"}
		}
		facts.TaskFolder = taskFolder
		if Authorize(from, req, facts) != nil || isMain {
			return
		}
		switch req.Type {
		case TypeMessage:
			if facts.Target == nil || facts.Target.Folder != "family" {
				t.Fatalf("non-main message to %s allowed", req.ChatJID)
			}
		case TypeScheduleTask:
			if req.TargetJID != "" {
				t.Fatalf("non-main task for %s allowed", req.TargetJID)
			}
		case TypePauseTask, TypeResumeTask, TypeCancelTask, TypeUpdateTask:
			if taskFolder != "family" {
				t.Fatalf("non-main change of %s's task allowed", taskFolder)
			}
		case TypeRegisterGroup, TypeRefreshGroups:
			t.Fatalf("non-main %s allowed", req.Type)
		}
	})
}

func TestTokens(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	now := time.Now()
	h.tokens.now = func() time.Time { return now }
	tok, err := h.tokens.Issue(ctx, "family")
	if err != nil || len(tok) != 64 {
		t.Fatalf("token %q %v", tok, err)
	}
	var raw []byte
	h.db.QueryRow(`SELECT hash FROM ipc_tokens WHERE folder = 'family' ORDER BY issued_at DESC LIMIT 1`).Scan(&raw)
	if strings.Contains(string(raw), tok) {
		t.Fatal("the token itself is stored")
	}
	check := func(folder, token string, wantOK bool, wantOwner string) {
		t.Helper()
		ok, owner, err := h.tokens.Check(ctx, folder, token)
		if err != nil || ok != wantOK || owner != wantOwner {
			t.Fatalf("Check(%s) = %v %q %v; want %v %q", folder, ok, owner, err, wantOK, wantOwner)
		}
	}
	check("family", tok, true, "")
	check("work", tok, false, "family")
	check("family", "nope", false, "")
	check("family", "", false, "")
	check("", "", false, "")

	if err := h.tokens.Finish(ctx, tok); err != nil {
		t.Fatal(err)
	}
	now = now.Add(TokenGrace - time.Second)
	check("family", tok, true, "") // just finished
	now = now.Add(2 * time.Second)
	check("family", tok, false, "")

	// A restart: live runs count as finished at start, then expire.
	live, _ := h.tokens.Issue(ctx, "work")
	restarted, err := OpenTokens(ctx, h.db)
	if err != nil {
		t.Fatal(err)
	}
	restarted.now = func() time.Time { return time.Now().Add(TokenGrace - time.Second) }
	if ok, _, _ := restarted.Check(ctx, "work", live); !ok {
		t.Fatal("a token of a run cut by the restart is refused within the grace period")
	}
	restarted.now = func() time.Time { return time.Now().Add(TokenGrace + time.Second) }
	if ok, _, _ := restarted.Check(ctx, "work", live); ok {
		t.Fatal("a token outlived the grace period after a restart")
	}
}

// register_group's senders (offered by the MCP tool) reach the request.
func TestDecodeSenders(t *testing.T) {
	req, err := Decode([]byte(`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":["4917012345","4917099999"],"token":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(req.Senders, ",") != "4917012345,4917099999" {
		t.Errorf("senders %q", req.Senders)
	}
}
