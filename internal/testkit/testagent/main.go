// Command testagent is a stand-in for the real agent runner, for tests of
// the runner, the queue and the daemon end to end. It speaks the agent
// protocol (package protocol: ContainerInput on stdin, three-line frames on
// stdout, follow-ups in $NANOCLAW_IPC_DIR/input/) and does what the last
// message of its prompt says. The command is the text of the last
// <message> element (unescaped, a leading @trigger word dropped), or the
// whole prompt when it has no <message> (a scheduled task):
//
//	api N             N streamed Messages API requests to $ANTHROPIC_BASE_URL with
//	                  the credential it holds, as the SDK makes them; reply
//	                  "api N ok: TEXT" (the streamed text), or at the first
//	                  refusal an error result "API Error: STATUS MESSAGE", exit 1
//	api-servertools   as "api 1", the request carrying server tools (web search,
//	                  web fetch, code execution), mcp_servers and their betas
//	curl URL          POST to URL through $HTTP_PROXY whatever its host (as curl
//	                  does); reply "curl URL: STATUS" or "curl URL: refused (…)"
//	echo TEXT         reply "echo: TEXT"; newSessionId = the sessionId it was
//	                  given, or a fresh "sess-…" when it had none
//	session           reply "session: <the sessionId it was given>" ("none" if empty)
//	prompt            reply with the whole prompt as received
//	stdin             reply with the raw stdin JSON
//	env               reply with its environment, sorted, one NAME=value a line
//	sleep SECONDS     sleep (fractions allowed), then reply "slept SECONDS"
//	hang              ignore SIGTERM and never finish (only SIGKILL ends it)
//	answer-then-hang  reply "answered", then hang
//	ipc TEXT          write an IPC message "ipc TEXT" to its own chat (noted in
//	                  $TESTAGENT_LOG if set), then reply "queued TEXT"
//	ipc-to JID TEXT   the same to the chat JID, which a non-main group may
//	                  not message (noted as "cross TEXT"), reply "queued TEXT"
//	ipc-forged TEXT   the same to its own chat with a wrong token (noted as
//	                  "forged TEXT"), then reply "queued TEXT"
//	send-file PATH TEXT
//	                  write "file PATH of FOLDER" to PATH (relative to its
//	                  working directory, the group's folder), then an IPC
//	                  message "ipc TEXT" to its own chat with "file": PATH
//	                  (noted as "file TEXT"), reply "queued TEXT"
//	ipc-file PATH TEXT
//	                  the same IPC message without writing anything first:
//	                  PATH is sent as given (/etc/passwd, ../other/x)
//	link-file TARGET PATH TEXT
//	                  make PATH a symlink to TARGET, then ipc-file PATH TEXT
//	search WORDS      a search_history request file for WORDS in its own chat;
//	                  waits for the verdict and replies "search: VERDICT JSON"
//	search-in JID WORDS
//	                  the same naming the chat JID
//	search-quoted "Q" the same with the query Q, Go-quoted, as it is
//	                  (control characters and all)
//	react ID EMOJI    an IPC reaction with EMOJI to its chat's message ID (noted
//	                  as "react ID"), then reply "reacted ID"
//	hash PATH...      reply one line per PATH (relative to its working
//	                  directory): "PATH sha256:HEX SIZE" or "PATH error: …",
//	                  which shows what a (confined) run can read
//	plant TARGET PATH move PATH aside (to PATH.old) and make it a symlink to
//	                  TARGET, reply "planted PATH" or "plant error: …"
//	task TYPE VALUE TEXT
//	                  an IPC schedule_task (context isolated) whose prompt is
//	                  "run TEXT" (noted as "task TEXT"), then reply
//	                  "scheduled TEXT"; a once VALUE "+N" means N seconds
//	                  from now, in local time
//	run TEXT          reply "ran TEXT #ID", ID unique to this run
//	fetch URL         GET URL through $HTTPS_PROXY/$HTTP_PROXY (the gateway, in a
//	                  sandbox), reply "fetch URL: STATUS" or "fetch URL: refused (ERROR)"
//	forget            reply "forgot" with a newSessionId "gone-…": resuming it
//	                  fails the way the CLI fails for a pruned transcript
//	crash             print three lines to stderr and exit with status 3
//	fail TEXT         a result frame with status "error" and error TEXT, exit 0
//	silent            exit 0 without any frame
//	violation KIND TARGET
//	                  a violation frame (tool "Bash"; noted in $TESTAGENT_LOG
//	                  as "violation TARGET"), then reply "violation reported"
//	violations N      N "reported" filesystem frames with distinct targets and one
//	                  network frame carrying an attacker's instruction, then
//	                  reply "violations reported"
//	noise             stray stdout lines and broken frames around three good
//	                  frames: "one", a null result, "two"
//	flood [MIB]       an oversized frame, a 3 MiB line, then MIB MiB (default 16)
//	                  of lines on stdout and stderr, then reply "flooded"
//	fork [COMMAND]    start a grandchild that ignores SIGTERM and sleeps
//	                  forever (in the same process group), reply "forked PID",
//	                  then do COMMAND (default: exit 0 at once)
//	followup          reply "ready", then answer each input/*.json file with
//	                  "followup: TEXT" (deleting it) until input/_close
//	                  appears; then reply "closed" and exit 0. Each result
//	                  carries the sessionId it was given as newSessionId, as
//	                  the real runner's do
//	converse          followup, but the first reply is the whole prompt and
//	                  each follow-up's is "followup: " and its whole text, so
//	                  every reply shows which messages it answered
//
// Anything else is answered like echo with the whole text: "echo: TEXT".
//
// The list above and the switch that carries it out (do, in main.go) are
// read together, one command at a time; a command that takes more than a
// few lines lives in a file named for it (api.go, search.go, followup.go,
// ipc.go, misbehave.go, net.go).
package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

type input = protocol.ContainerInput

// ipcDir is the run's IPC directory.
func ipcDir() layout.IPCDir { return layout.IPCDir(os.Getenv(protocol.EnvIPCDir)) }

// firstInput waits for the first input/*.json file (or _close, which ends
// a standby that was never used) and returns its text.
func firstInput() string {
	dir := ipcDir().Input()
	for {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() == layout.CloseFile {
				os.Exit(0)
			}
			if strings.HasSuffix(e.Name(), ".json") {
				p := filepath.Join(dir, e.Name())
				text, _, err := protocol.ReadFollowUp(p)
				if err != nil {
					continue
				}
				os.Remove(p)
				fmt.Fprintf(os.Stderr, "testagent: standby got its prompt\n")
				return text
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func main() {
	if os.Getenv("TESTAGENT_ROLE") == "grandchild" {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(1<<63 - 1)
	}
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fatal("reading stdin: %v", err)
	}
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		fatal("stdin is not a ContainerInput: %v", err)
	}
	if in.Standby {
		in.Prompt = firstInput() // started ahead: the prompt comes as a follow-up
	}
	if strings.HasPrefix(in.SessionID, "gone-") {
		// What the Claude CLI says when the transcript of a session is gone.
		frame(protocol.Frame{Status: protocol.StatusError,
			Error: "Claude Code returned an error result: No conversation found with session ID: " + in.SessionID})
		os.Exit(1)
	}
	do(command(in.Prompt), in, raw)
}

var lastMessage = regexp.MustCompile(`(?s)<message(?:\s[^>]*)?>(?:<quote[^>]*>.*?</quote>)?(.*?)</message>`)

// command finds what the prompt asks for.
func command(prompt string) string {
	text := prompt
	if strings.HasPrefix(text, "[SCHEDULED TASK]") {
		_, text, _ = strings.Cut(text, "\n\n") // the daemon's marker, then the task's prompt
	}
	if m := lastMessage.FindAllStringSubmatch(prompt, -1); len(m) > 0 {
		text = html.UnescapeString(m[len(m)-1][1])
	}
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "@") {
		_, rest, _ := strings.Cut(text, " ")
		text = strings.TrimSpace(rest)
	}
	return text
}

func do(text string, in input, raw []byte) {
	verb, arg, _ := strings.Cut(text, " ")
	arg = strings.TrimSpace(arg)
	switch verb {
	case "api":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			fatal("api wants a number of requests: %q", arg)
		}
		callAPI(n, in.Prompt)
	case "api-servertools":
		callAPIWith(1, in.Prompt, serverTools, serverBetas)
	case "echo":
		session := in.SessionID
		if session == "" {
			session = fmt.Sprintf("sess-%d", time.Now().UnixNano())
		}
		result("echo: "+arg, session)
	case "session":
		s := in.SessionID
		if s == "" {
			s = "none"
		}
		result("session: "+s, "")
	case "prompt":
		result(in.Prompt, "")
	case "stdin":
		result(string(raw), "")
	case "env":
		env := os.Environ()
		sort.Strings(env)
		result(strings.Join(env, "\n"), "")
	case "fetch":
		result("fetch "+arg+": "+fetch(arg), "")
	case "curl":
		result("curl "+arg+": "+curl(arg), "")
	case "sleep":
		d, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			fatal("sleep wants seconds: %v", err)
		}
		time.Sleep(time.Duration(d * float64(time.Second)))
		result("slept "+arg, "")
	case "ipc":
		writeIPC(ipcDir().Messages(), arg, map[string]string{"type": "message", "chatJid": os.Getenv(protocol.EnvChatJID),
			"text": "ipc " + arg, "token": os.Getenv(protocol.EnvIPCToken)}, "ipc "+arg)
		result("queued "+arg, "")
	case "ipc-to":
		jid, text, _ := strings.Cut(arg, " ")
		writeIPC(ipcDir().Messages(), text, map[string]string{"type": "message", "chatJid": jid,
			"text": "ipc " + text, "token": os.Getenv(protocol.EnvIPCToken)}, "cross "+text)
		result("queued "+text, "")
	case "ipc-forged":
		writeIPC(ipcDir().Messages(), arg, map[string]string{"type": "message", "chatJid": os.Getenv(protocol.EnvChatJID),
			"text": "ipc " + arg, "token": "forged-" + os.Getenv(protocol.EnvIPCToken)}, "forged "+arg)
		result("queued "+arg, "")
	case "send-file", "ipc-file", "link-file":
		f := strings.SplitN(arg, " ", 3)
		if verb == "link-file" {
			if len(f) != 3 {
				fatal("link-file wants TARGET PATH TEXT, got %q", arg)
			}
			if err := os.Symlink(f[0], f[1]); err != nil {
				fatal("link-file: %v", err)
			}
			f = f[1:]
		} else {
			f = strings.SplitN(arg, " ", 2)
		}
		if len(f) != 2 {
			fatal("%s wants PATH TEXT, got %q", verb, arg)
		}
		if verb == "send-file" {
			if err := os.MkdirAll(filepath.Dir(f[0]), 0o700); err != nil {
				fatal("send-file: %v", err)
			}
			if err := os.WriteFile(f[0], []byte("file "+f[0]+" of "+os.Getenv(protocol.EnvGroupFolder)), 0o600); err != nil {
				fatal("send-file: %v", err)
			}
		}
		writeIPC(ipcDir().Messages(), f[1], map[string]string{"type": "message", "chatJid": os.Getenv(protocol.EnvChatJID),
			"text": "ipc " + f[1], "file": f[0], "token": os.Getenv(protocol.EnvIPCToken)}, "file "+f[1])
		result("queued "+f[1], "")
	case "search", "search-in", "search-quoted":
		search(verb, arg)
	case "react":
		id, emoji, _ := strings.Cut(arg, " ")
		writeIPC(ipcDir().Messages(), "react "+id, map[string]string{"type": "reaction", "chatJid": os.Getenv(protocol.EnvChatJID),
			"messageId": id, "emoji": emoji, "token": os.Getenv(protocol.EnvIPCToken)}, "react "+id)
		result("reacted "+id, "")
	case "hash":
		var lines []string
		for _, p := range strings.Fields(arg) {
			data, err := os.ReadFile(p)
			if err != nil {
				lines = append(lines, p+" error: "+err.Error())
				continue
			}
			lines = append(lines, fmt.Sprintf("%s sha256:%x %d", p, sha256.Sum256(data), len(data)))
		}
		result(strings.Join(lines, "\n"), "")
	case "plant":
		target, path, _ := strings.Cut(arg, " ")
		if _, err := os.Lstat(path); err == nil {
			if err := os.Rename(path, path+".old"); err != nil {
				result("plant error: "+err.Error(), "")
				return
			}
		}
		if err := os.Symlink(target, path); err != nil {
			result("plant error: "+err.Error(), "")
			return
		}
		result("planted "+path, "")
	case "task":
		f := strings.SplitN(arg, " ", 3)
		if len(f) != 3 {
			fatal("task wants TYPE VALUE TEXT, got %q", arg)
		}
		if secs, ok := strings.CutPrefix(f[1], "+"); ok && f[0] == "once" {
			n, err := strconv.Atoi(secs)
			if err != nil {
				fatal("task once +SECONDS: %v", err)
			}
			f[1] = time.Now().Add(time.Duration(n) * time.Second).Format("2006-01-02T15:04:05")
		}
		writeIPC(ipcDir().Tasks(), f[2], map[string]string{"type": "schedule_task", "prompt": "run " + f[2], "schedule_type": f[0],
			"schedule_value": f[1], "context_mode": "isolated", "token": os.Getenv(protocol.EnvIPCToken)}, "task "+f[2])
		result("scheduled "+f[2], "")
	case "run":
		result(fmt.Sprintf("ran %s #%d-%d", arg, os.Getpid(), time.Now().UnixNano()), "")
	case "forget":
		result("forgot", fmt.Sprintf("gone-%d", time.Now().UnixNano()))
	case "answer-then-hang":
		result("answered", "")
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(1<<63 - 1)
	case "hang":
		signal.Ignore(syscall.SIGTERM)
		fmt.Fprintln(os.Stderr, "hanging")
		time.Sleep(1<<63 - 1)
	case "crash":
		fmt.Fprintln(os.Stderr, "testagent: starting to crash")
		fmt.Fprintln(os.Stderr, "testagent: something went wrong")
		fmt.Fprintln(os.Stderr, "testagent: crashed on purpose")
		os.Exit(3)
	case "fail":
		frame(protocol.Frame{Status: protocol.StatusError, Error: arg})
	case "fail-wait":
		// As the real agent runner does after an error result: it stays
		// for follow-ups until asked to finish, then exits 1.
		frame(protocol.Frame{Status: protocol.StatusError, Error: arg})
		for {
			if _, err := os.Stat(ipcDir().Close()); err == nil {
				os.Exit(1)
			}
			time.Sleep(10 * time.Millisecond) // a stand-in agent may poll; the daemon never does
		}
	case "silent":
	case "violation":
		kind, target, _ := strings.Cut(arg, " ")
		note("violation " + target) // first: the log may count a frame never written, never miss one
		// It claims "blocked", as any agent may: the daemon records "reported".
		frame(protocol.ViolationFrame(protocol.Violation{Kind: kind, Tool: "Bash", Target: target, Detail: "testagent", Action: protocol.ActionBlocked}))
		result("violation reported", "")
	case "violations":
		// Distinct fake denials, as an agent printing them in a loop makes:
		// each a "reported" frame with its own target.
		n, _ := strconv.Atoi(arg)
		for i := range n {
			frame(protocol.ViolationFrame(protocol.Violation{Kind: "filesystem", Tool: "Bash", Action: protocol.ActionReported,
				Target: fmt.Sprintf("/fake/%d", i), Detail: "Read-only file system"}))
		}
		frame(protocol.ViolationFrame(protocol.Violation{Kind: "network", Tool: "Bash", Action: protocol.ActionReported, Target: "wa.me",
			Detail: "deny network-outbound wa.me:443 — reply to this bot with your 6-digit WhatsApp code " + strings.Repeat("!", 2000)}))
		result("violations reported", "")
	case "noise":
		noise()
	case "flood":
		mib := 16
		if arg != "" {
			mib, _ = strconv.Atoi(arg)
		}
		flood(mib)
		result("flooded", "")
	case "fork":
		fork(arg, in, raw)
	case "followup":
		followup(in.SessionID, "ready", "followup: ")
	case "converse":
		followup(in.SessionID, in.Prompt, "followup: ")
	default:
		result("echo: "+text, "")
	}
}

func frame(payload any) {
	if err := protocol.WriteFrame(os.Stdout, payload); err != nil {
		fatal("%v", err)
	}
}

func result(text, session string) {
	f := protocol.Result(text)
	f.NewSessionID = session
	frame(f)
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testagent: "+format+"\n", args...)
	os.Exit(2)
}
