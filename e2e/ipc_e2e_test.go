package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// End-to-end proof of contract §5: IPC files dropped into a running
// daemon's directories. Valid ones act once (even across a kill -9);
// hostile ones are refused, quarantined in ipc/errors/, audited, alerted
// when they try to act as another group, and leave the daemon answering.

// agentScript is the agent of these tests. It tells the test each run's
// IPC token (in $NC_SCRATCH/<folder>), answers three commands the stand-in
// agent has not got, and hands every other prompt to the stand-in agent.
const agentScript = `#!/bin/sh
printf '%s' "$NANOCLAW_IPC_TOKEN" > "$NC_SCRATCH/$NANOCLAW_GROUP_FOLDER.tmp"
mv "$NC_SCRATCH/$NANOCLAW_GROUP_FOLDER.tmp" "$NC_SCRATCH/$NANOCLAW_GROUP_FOLDER"
input=$(cat)
frame() { printf '%s\n%s\n%s\n' '---NANOCLAW_OUTPUT_START---' "$1" '---NANOCLAW_OUTPUT_END---'; }
case "$input" in
*quiet-violation*) # a blocked action, and nothing said to the chat
	frame '{"type":"violation","kind":"network","tool":"Bash","target":"quiet.example","detail":"curl"}'
	frame '{"status":"success","result":null}' ;;
*flood-violations*) # the same blocked action 1,000 times
	i=0
	while [ $i -lt 1000 ]; do
		frame '{"type":"violation","kind":"network","tool":"Bash","target":"flood.example","detail":"curl"}'
		i=$((i+1))
	done
	frame '{"status":"success","result":"flood done"}' ;;
*bench-violations*) # N blocked actions to different hosts, each stamped with the time it is printed
	n=$(printf '%s' "$input" | sed -n 's/.*bench-violations \([0-9]*\).*/\1/p')
	i=0
	while [ $i -lt "$n" ]; do
		frame "{\"type\":\"violation\",\"kind\":\"network\",\"tool\":\"Bash\",\"target\":\"bench-$i.example\",\"detail\":\"at $(date +%s%N)\"}"
		sleep 0.02
		i=$((i+1))
	done
	frame '{"status":"success","result":"bench done"}' ;;
*)
	printf '%s' "$input" | exec TESTAGENT ;;
esac
`

// writeAgentScript writes agentScript into dir and returns its path.
func writeAgentScript(tb testing.TB, dir string) string {
	path := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(agentScript, "TESTAGENT", e2e.Testagent(tb))), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

// agentConfig is the "agent" config object that runs agentScript.
func agentConfig(script string) string {
	return `"command": [` + e2e.Quote(script) + `], "timeout": "60s", "idleTimeout": "60s", "env": ["NC_SCRATCH"]`
}

// scratchSecurity lets confined agents write the test's scratch dir and
// run the stand-in agent the script hands over to.
func scratchSecurity(tb testing.TB, scratch string) string {
	return `"allowWrite": [` + e2e.Quote(e2e.Shared(tb, scratch)) + `], "allowRead": [` + e2e.Quote(e2e.Testagent(tb)) + `]`
}

// ipcInstall is an install whose agents tell the test their IPC tokens.
type ipcInstall struct {
	*e2e.Install
	tokens string
	n      int // makes texts unique
}

// newIPCInstall prepares an install running agentScript, with
// alerts.cooldown set to cooldown.
func newIPCInstall(t *testing.T, cooldown string) *ipcInstall {
	t.Helper()
	tokens := t.TempDir()
	in := e2e.New(t, e2e.Options{Agent: agentConfig(writeAgentScript(t, t.TempDir())),
		Alerts: `"cooldown": ` + e2e.Quote(cooldown), Env: []string{"NC_SCRATCH=" + tokens},
		Security: scratchSecurity(t, tokens)})
	return &ipcInstall{Install: in, tokens: tokens}
}

// threeGroups registers main (local:main), family and work.
func (h *ipcInstall) threeGroups() {
	h.AddGroup("local:main", "main", "--main")
	h.AddGroup("local:family", "family")
	h.AddGroup("local:work", "work")
}

// sub points the install's failures at subtest t until the subtest ends.
func (h *ipcInstall) sub(t *testing.T) {
	parent := h.TB
	h.TB = t
	t.Cleanup(func() { h.TB = parent })
}

func (h *ipcInstall) unique(prefix string) string {
	h.n++
	return fmt.Sprintf("%s-%d", prefix, h.n)
}

// token runs folder's agent once (through chat) and returns that run's
// NANOCLAW_IPC_TOKEN; it stays valid for two minutes after the run.
func (h *ipcInstall) token(chat, folder string) string {
	h.TB.Helper()
	path := filepath.Join(h.tokens, folder)
	os.Remove(path)
	text := h.unique("token")
	h.Post(chat, "Owner", "@Andy echo "+text)
	h.WaitFor(chat, e2e.Equals("echo: "+text))
	tok, err := os.ReadFile(path)
	if err != nil || len(tok) == 0 {
		h.TB.Fatalf("the run of %s left no token: %v", folder, err)
	}
	return string(tok)
}

func (h *ipcInstall) ipcDir(folder, sub string) string {
	return filepath.Join(h.Dir, "data", "ipc", folder, sub)
}

// ipcFile is the JSON object of the key/value pairs kv.
func ipcFile(kv ...string) []byte {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return b
}

// drop writes body into folder's sub/ as the nanoclaw MCP tools do
// (NAME.json.tmp, then renamed to NAME.json) and returns NAME.json.
func (h *ipcInstall) drop(folder, sub, tag string, body []byte) string {
	h.TB.Helper()
	name := fmt.Sprintf("%d-%s.json", time.Now().UnixNano(), tag)
	tmp := filepath.Join(h.ipcDir(folder, sub), name+".tmp")
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		h.TB.Fatal(err)
	}
	if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
		h.TB.Fatal(err)
	}
	return name
}

// auditEntry is one line of security.jsonl, or one item of
// `nanoclawd violations --json`.
type auditEntry struct {
	Time, Group, Kind, Tool, Target, Detail, Action string
}

// auditLines reads groups/<folder>/logs/security.jsonl, checking that each
// line has exactly the contract's fields.
func (h *ipcInstall) auditLines(folder string) []auditEntry {
	h.TB.Helper()
	data, err := os.ReadFile(filepath.Join(h.Dir, "groups", folder, "logs", "security.jsonl"))
	if err != nil && !os.IsNotExist(err) {
		h.TB.Fatal(err)
	}
	var out []auditEntry
	for line := range strings.Lines(string(data)) {
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			h.TB.Fatalf("security.jsonl of %s: %v: %q", folder, err, line)
		}
		var keys []string
		for k := range fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if want := []string{"action", "detail", "group", "kind", "target", "time", "tool"}; !slices.Equal(keys, want) {
			h.TB.Errorf("security.jsonl line has fields %v, want %v", keys, want)
		}
		var e auditEntry
		json.Unmarshal([]byte(line), &e)
		if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || (e.Action != "blocked" && e.Action != "reported") || e.Group != folder {
			h.TB.Errorf("security.jsonl of %s: bad line %q", folder, line)
		}
		out = append(out, e)
	}
	return out
}

// waitAudit waits for the line of security.jsonl of folder that ok picks.
func (h *ipcInstall) waitAudit(folder string, ok func(auditEntry) bool) auditEntry {
	h.TB.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range h.auditLines(folder) {
			if ok(e) {
				return e
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.TB.Fatalf("no line of groups/%s/logs/security.jsonl matched; have %+v", folder, h.auditLines(folder))
	return auditEntry{}
}

// violations is `nanoclawd violations --group folder --json`.
func (h *ipcInstall) violations(folder string) []auditEntry {
	h.TB.Helper()
	var out []auditEntry
	if err := json.Unmarshal([]byte(h.CLI("violations", "--group", folder, "--json")), &out); err != nil {
		h.TB.Fatal(err)
	}
	return out
}

// refused waits until the file NAME in folder's sub/ has been moved to
// ipc/errors/ with its reason beside it, checks that the reason says
// wantReason, and that the refusal is audited for group (the group that
// tried: the directory's, or the owner of the token) in security.jsonl
// and in `nanoclawd violations`.
func (h *ipcInstall) refused(folder, sub, name, group, wantReason string) auditEntry {
	h.TB.Helper()
	errorsDir := filepath.Join(h.Dir, "data", "ipc", "errors")
	pattern := filepath.Join(errorsDir, folder+"."+sub+".*."+name)
	deadline := time.Now().Add(20 * time.Second)
	var reasons []string
	for len(reasons) == 0 && time.Now().Before(deadline) {
		reasons, _ = filepath.Glob(pattern + ".reason")
		time.Sleep(5 * time.Millisecond)
	}
	if len(reasons) != 1 {
		entries, _ := os.ReadDir(errorsDir)
		h.TB.Fatalf("%s/%s not quarantined once (%d reasons); ipc/errors holds %v", sub, name, len(reasons), entries)
	}
	reason, _ := os.ReadFile(reasons[0])
	if !strings.Contains(string(reason), wantReason) {
		h.TB.Errorf("reason for %s is %q, want it to say %q", name, reason, wantReason)
	}
	if _, err := os.Lstat(strings.TrimSuffix(reasons[0], ".reason")); err != nil {
		h.TB.Errorf("the file itself is not in ipc/errors: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(h.ipcDir(folder, sub), name)); !os.IsNotExist(err) {
		h.TB.Errorf("%s still in %s/ (%v)", name, sub, err)
	}
	e := h.waitAudit(group, func(e auditEntry) bool { return strings.Contains(e.Detail, name) })
	if e.Kind != "ipc" || e.Tool != "ipc" {
		h.TB.Errorf("audit line %+v: want kind and tool ipc", e)
	}
	n := 0
	for _, v := range h.violations(group) {
		if strings.Contains(v.Detail, name) {
			n++
		}
	}
	if n != 1 {
		h.TB.Errorf("`nanoclawd violations --group %s` lists %s %d times", group, name, n)
	}
	return e
}

// alerted waits for the [SANDBOX ALERT] in the main chat about the file
// NAME that names group as the one that tried.
func (h *ipcInstall) alerted(name, group string) string {
	h.TB.Helper()
	all := h.WaitFor("local:main", func(s string) bool { return strings.Contains(s, name) })
	text := all[len(all)-1].Text
	if !strings.HasPrefix(text, "[SANDBOX ALERT]") || !strings.Contains(text, fmt.Sprintf("group %q", group)) {
		h.TB.Errorf("alert does not start with [SANDBOX ALERT] or name group %s:\n%s", group, text)
	}
	return text
}

// stillAnswering shows that the daemon and its IPC watcher work on: a
// valid IPC file from main and a chat message are both answered. The
// watcher handles files one at a time, so anything a file dropped before
// this one caused in the main chat is on /sent before it.
func (h *ipcInstall) stillAnswering(mainToken string) {
	h.TB.Helper()
	text := h.unique("alive")
	h.drop("main", "messages", "alive", ipcFile("type", "message", "chatJid", "local:main", "text", "ipc "+text, "token", mainToken))
	h.Post("local:main", "Owner", "echo "+text)
	h.WaitFor("local:main", e2e.Equals("ipc "+text))
	h.WaitFor("local:main", e2e.Equals("echo: "+text))
}

// neverSent checks that no sent message contains s.
func (h *ipcInstall) neverSent(s string) {
	h.TB.Helper()
	for _, m := range h.AllSent() {
		if strings.Contains(m.Text, s) {
			h.TB.Errorf("%q reached %s: %q", s, m.ChatJID, m.Text)
		}
	}
}

// notAlerted checks that no message in the main chat mentions name.
func (h *ipcInstall) notAlerted(name string) {
	h.TB.Helper()
	for _, m := range h.AllSent() {
		if m.ChatJID == "local:main" && strings.Contains(m.Text, name) {
			h.TB.Errorf("alerted, but should only be audited: %q", m.Text)
		}
	}
}

func (h *ipcInstall) groupFolders() []string {
	h.TB.Helper()
	var list []struct{ Folder string }
	if err := json.Unmarshal([]byte(h.CLI("groups", "list", "--json")), &list); err != nil {
		h.TB.Fatal(err)
	}
	var out []string
	for _, g := range list {
		out = append(out, g.Folder)
	}
	return out
}

func TestIPCValidFiles(t *testing.T) {
	h := newIPCInstall(t, "0s")
	h.threeGroups()
	h.Start()
	famTok := h.token("local:family", "family")
	mainTok := h.token("local:main", "main")

	t.Run("own chat", func(t *testing.T) {
		h.sub(t)
		name := h.drop("family", "messages", "own", ipcFile("type", "message", "chatJid", "local:family", "text", "hello from family", "token", famTok))
		h.WaitFor("local:family", e2e.Equals("hello from family"))
		e2e.WaitGone(t, filepath.Join(h.ipcDir("family", "messages"), name)) // the handled file is removed
	})
	t.Run("main to another chat", func(t *testing.T) {
		h.sub(t)
		h.drop("main", "messages", "tow", ipcFile("type", "message", "chatJid", "local:work", "text", "hello work, from main", "token", mainTok))
		h.WaitFor("local:work", e2e.Equals("hello work, from main"))
	})
	t.Run("register_group", func(t *testing.T) {
		h.sub(t)
		h.drop("main", "tasks", "reg", []byte(`{"type":"register_group","jid":"local:newgrp","name":"New group","folder":"newgrp","requiresTrigger":false,"token":`+e2e.Quote(mainTok)+`}`))
		deadline := time.Now().Add(20 * time.Second)
		for !slices.Contains(h.groupFolders(), "newgrp") {
			if time.Now().After(deadline) {
				t.Fatalf("groups list lacks newgrp: %v", h.groupFolders())
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, sub := range []string{"messages", "tasks"} {
			fi, err := os.Stat(h.ipcDir("newgrp", sub))
			if err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("ipc/newgrp/%s: %v %v, want a 0700 directory", sub, fi.Mode(), err)
			}
		}
		// The new directory is watched at once: a file there is handled
		// without a rescan (it has no token, so it is refused and alerted).
		name := h.drop("newgrp", "messages", "untokened", ipcFile("type", "message", "chatJid", "local:newgrp", "text", "x"))
		h.refused("newgrp", "messages", name, "newgrp", "missing token")
		h.alerted(name, "newgrp")
		// Its agent runs (no trigger needed) and its token works there.
		tok := h.token("local:newgrp", "newgrp")
		h.drop("newgrp", "messages", "hi", ipcFile("type", "message", "chatJid", "local:newgrp", "text", "hello from newgrp", "token", tok))
		h.WaitFor("local:newgrp", e2e.Equals("hello from newgrp"))
	})
	t.Run("schedule_task once", func(t *testing.T) {
		h.sub(t)
		// "stdin": the stand-in agent answers with the ContainerInput it got.
		at := time.Now().Add(3 * time.Second).Truncate(time.Second)
		name := h.drop("family", "tasks", "once", ipcFile("type", "schedule_task", "prompt", "stdin", "schedule_type", "once",
			"schedule_value", at.Format("2006-01-02T15:04:05"), "context_mode", "isolated", "token", famTok))
		all := h.WaitFor("local:family", func(s string) bool { return strings.Contains(s, `"isScheduledTask":true`) })
		got := all[len(all)-1]
		var input struct {
			Prompt, GroupFolder, ChatJID string
			IsScheduledTask              bool
		}
		if err := json.Unmarshal([]byte(got.Text), &input); err != nil {
			t.Fatalf("reply is not the ContainerInput: %v: %s", err, got.Text)
		}
		// The task's own prompt comes after the daemon's [SCHEDULED TASK] line.
		if !strings.HasPrefix(input.Prompt, "[SCHEDULED TASK]") || !strings.HasSuffix(input.Prompt, "\n\nstdin") || input.GroupFolder != "family" || input.ChatJID != "local:family" || !input.IsScheduledTask {
			t.Errorf("task run got %+v", input)
		}
		if sentAt, _ := time.Parse(time.RFC3339Nano, got.Time); sentAt.Before(at) {
			t.Errorf("the task answered at %v, before it was due at %v", sentAt, at)
		}
		e2e.WaitGone(t, filepath.Join(h.ipcDir("family", "tasks"), name)) // the task file is removed
	})
}

// TestIPCKill9Burst drops 200 valid files at once, kills the daemon with
// SIGKILL while it works through them, and checks after the restart that
// every text was sent exactly once.
func TestIPCKill9Burst(t *testing.T) {
	const files = 200
	h := newIPCInstall(t, "0s")
	h.AddGroup("local:main", "main", "--main")
	h.AddGroup("local:family", "family")
	p := h.Start()
	tok := h.token("local:family", "family")
	dir := h.ipcDir("family", "messages")
	var tmps []string
	for i := range files {
		tmp := filepath.Join(dir, fmt.Sprintf("%d-burst-%03d.json.tmp", time.Now().UnixNano(), i))
		if err := os.WriteFile(tmp, ipcFile("type", "message", "chatJid", "local:family", "text", fmt.Sprintf("burst %03d", i), "token", tok), 0o600); err != nil {
			t.Fatal(err)
		}
		tmps = append(tmps, tmp)
	}
	before := lastSeq(h.AllSent())
	for _, tmp := range tmps {
		if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
			t.Fatal(err)
		}
	}
	// Kill as soon as the first one is out.
	h.SentAfter(before, 10*time.Second)
	p.Kill9()
	left, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	t.Logf("killed with %d of %d files not yet handled", len(left), files)

	h.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		count := h.countBurst()
		if len(count) == files {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the restart only %d of %d texts were sent", len(count), files)
		}
		h.SentAfter(lastSeq(h.AllSent()), time.Second)
	}
	// A file from the same group after the burst: the outbox sends a chat
	// in order, so any repeat of a burst file would come out before it.
	text := h.unique("after burst")
	h.drop("family", "messages", "after", ipcFile("type", "message", "chatJid", "local:family", "text", text, "token", tok))
	h.WaitFor("local:family", e2e.Equals(text))
	for text, n := range h.countBurst() {
		if n != 1 {
			t.Errorf("%q sent %d times", text, n)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("files left in messages/: %v", left)
	}
}

type snapshotTask struct{ ID, GroupFolder, Prompt, Status string }

// waitTask waits for the task with prompt in folder's current_tasks.json.
func (h *ipcInstall) waitTask(folder, prompt string) snapshotTask {
	h.TB.Helper()
	path := filepath.Join(h.ipcDir(folder, ""), "current_tasks.json")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var tasks []snapshotTask
		data, _ := os.ReadFile(path)
		json.Unmarshal(data, &tasks)
		for _, task := range tasks {
			if task.Prompt == prompt {
				return task
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	data, _ := os.ReadFile(path)
	h.TB.Fatalf("no task %q in %s: %s", prompt, path, data)
	return snapshotTask{}
}

func lastSeq(all []e2e.Sent) int64 {
	if len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Seq
}

func (h *ipcInstall) countBurst() map[string]int {
	count := map[string]int{}
	for _, m := range h.AllSent() {
		if m.ChatJID == "local:family" && strings.HasPrefix(m.Text, "burst ") {
			count[m.Text]++
		}
	}
	return count
}
