package ipc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

func TestAuthorize(t *testing.T) {
	main := groups.Group{JID: "m@g.us", Folder: "main", IsMain: true}
	fam := groups.Group{JID: "f@g.us", Folder: "family"}
	work := groups.Group{JID: "w@g.us", Folder: "work"}
	tests := []struct {
		name  string
		from  groups.Group
		req   protocol.Request
		facts Facts
		ok    bool
		alert bool
	}{
		{"main messages anyone", main, protocol.Request{Type: protocol.TypeMessage, ChatJID: "x@s.whatsapp.net"}, Facts{}, true, false},
		{"group messages itself", fam, protocol.Request{Type: protocol.TypeMessage, ChatJID: fam.JID}, Facts{Target: &fam}, true, false},
		{"group messages another", fam, protocol.Request{Type: protocol.TypeMessage, ChatJID: work.JID}, Facts{Target: &work}, false, true},
		{"group messages unregistered", fam, protocol.Request{Type: protocol.TypeMessage, ChatJID: "x@g.us"}, Facts{}, false, true},
		{"main reacts anywhere", main, protocol.Request{Type: protocol.TypeReaction, ChatJID: work.JID}, Facts{Target: &work}, true, false},
		{"group reacts in its chat", fam, protocol.Request{Type: protocol.TypeReaction, ChatJID: fam.JID}, Facts{Target: &fam}, true, false},
		{"group reacts in another", fam, protocol.Request{Type: protocol.TypeReaction, ChatJID: work.JID}, Facts{Target: &work}, false, true},
		{"own task", fam, protocol.Request{Type: protocol.TypeScheduleTask}, Facts{}, true, false},
		{"main schedules for work", main, protocol.Request{Type: protocol.TypeScheduleTask, TargetJID: work.JID}, Facts{Target: &work}, true, false},
		{"main schedules for unregistered", main, protocol.Request{Type: protocol.TypeScheduleTask, TargetJID: "x"}, Facts{}, false, false},
		{"group schedules for work", fam, protocol.Request{Type: protocol.TypeScheduleTask, TargetJID: work.JID}, Facts{Target: &work}, false, true},
		{"group pauses own", fam, protocol.Request{Type: protocol.TypePauseTask, TaskID: "t"}, Facts{TaskFolder: "family"}, true, false},
		{"group cancels work's", fam, protocol.Request{Type: protocol.TypeCancelTask, TaskID: "t"}, Facts{TaskFolder: "work"}, false, true},
		{"group updates work's", fam, protocol.Request{Type: protocol.TypeUpdateTask, TaskID: "t"}, Facts{TaskFolder: "work"}, false, true},
		{"main resumes work's", main, protocol.Request{Type: protocol.TypeResumeTask, TaskID: "t"}, Facts{TaskFolder: "work"}, true, false},
		{"no such task", main, protocol.Request{Type: protocol.TypeResumeTask, TaskID: "t"}, Facts{}, false, false},
		{"main registers", main, protocol.Request{Type: protocol.TypeRegisterGroup, JID: "n@g.us", Folder: "n"}, Facts{}, true, false},
		{"main re-registers same", main, protocol.Request{Type: protocol.TypeRegisterGroup, JID: "n@g.us", Folder: "n"}, Facts{FolderOwner: "n@g.us"}, true, false},
		{"main takes a used folder", main, protocol.Request{Type: protocol.TypeRegisterGroup, JID: "n@g.us", Folder: "work"}, Facts{FolderOwner: work.JID}, false, false},
		{"group registers", fam, protocol.Request{Type: protocol.TypeRegisterGroup, JID: "n@g.us", Folder: "n"}, Facts{}, false, true},
		{"group refreshes", fam, protocol.Request{Type: protocol.TypeRefreshGroups}, Facts{}, false, true},
		{"group searches its chat", fam, protocol.Request{Type: protocol.TypeSearchHistory}, Facts{}, true, false},
		{"group searches its chat by name", fam, protocol.Request{Type: protocol.TypeSearchHistory, ChatJID: fam.JID}, Facts{Target: &fam}, true, false},
		{"group searches another", fam, protocol.Request{Type: protocol.TypeSearchHistory, ChatJID: work.JID}, Facts{Target: &work}, false, true},
		{"group searches unregistered", fam, protocol.Request{Type: protocol.TypeSearchHistory, ChatJID: "x@g.us"}, Facts{}, false, true},
		{"main searches work", main, protocol.Request{Type: protocol.TypeSearchHistory, ChatJID: work.JID}, Facts{Target: &work}, true, false},
		{"main searches unregistered", main, protocol.Request{Type: protocol.TypeSearchHistory, ChatJID: "x@g.us"}, Facts{}, false, false},
		{"unknown", main, protocol.Request{Type: "x"}, Facts{}, false, false},
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
		`{"type":"search_history","query":"plumber","chatJid":"w@g.us","limit":"5","token":"t"}`,
	} {
		f.Add([]byte(s), false, true, "work")
	}
	f.Fuzz(func(t *testing.T, data []byte, isMain, targetKnown bool, taskFolder string) {
		req, err := protocol.DecodeRequest(data, scheduler.Validate)
		if err != nil {
			return
		}
		if req.Token == "" {
			t.Fatal("accepted a file without a token")
		}
		from := groups.Group{JID: "f@g.us", Folder: "family", IsMain: isMain}
		var facts Facts
		if targetKnown {
			facts.Target = &groups.Group{JID: req.ChatJID + req.TargetJID, Folder: "work"}
		}
		facts.TaskFolder = taskFolder
		if Authorize(from, req, facts) != nil || isMain {
			return
		}
		switch req.Type {
		case protocol.TypeMessage:
			if facts.Target == nil || facts.Target.Folder != "family" {
				t.Fatalf("non-main message to %s allowed", req.ChatJID)
			}
		case protocol.TypeScheduleTask:
			if req.TargetJID != "" {
				t.Fatalf("non-main task for %s allowed", req.TargetJID)
			}
		case protocol.TypePauseTask, protocol.TypeResumeTask, protocol.TypeCancelTask, protocol.TypeUpdateTask:
			if taskFolder != "family" {
				t.Fatalf("non-main change of %s's task allowed", taskFolder)
			}
		case protocol.TypeRegisterGroup, protocol.TypeRefreshGroups:
			t.Fatalf("non-main %s allowed", req.Type)
		case protocol.TypeSearchHistory:
			if req.ChatJID != "" && req.ChatJID != from.JID {
				t.Fatalf("non-main search of %s allowed", req.ChatJID)
			}
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
	h.db.QueryRowContext(ctx, `SELECT hash FROM ipc_tokens WHERE folder = 'family' ORDER BY issued_at DESC LIMIT 1`).Scan(&raw)
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
