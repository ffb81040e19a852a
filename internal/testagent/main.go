// Command testagent is a stand-in for the real agent runner, for tests of
// the runner, the queue and the daemon end to end. It speaks the agent
// protocol (package protocol: ContainerInput on stdin, three-line frames on
// stdout, follow-ups in $NANOCLAW_IPC_DIR/input/) and does what the last
// message of its prompt says. The command is the text of the last
// <message> element (unescaped, a leading @trigger word dropped), or the
// whole prompt when it has no <message> (a scheduled task):
//
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
//	forget            reply "forgot" with a newSessionId "gone-…": resuming it
//	                  fails the way the CLI fails for a pruned transcript
//	crash             print three lines to stderr and exit with status 3
//	fail TEXT         a result frame with status "error" and error TEXT, exit 0
//	silent            exit 0 without any frame
//	violation KIND TARGET
//	                  a violation frame (tool "Bash"), then reply "violation reported"
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
//
// Anything else is answered like echo with the whole text: "echo: TEXT".
package main

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
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
	case "sleep":
		d, err := strconv.ParseFloat(arg, 64)
		if err != nil {
			fatal("sleep wants seconds: %v", err)
		}
		time.Sleep(time.Duration(d * float64(time.Second)))
		result("slept "+arg, "")
	case "ipc":
		// A message through the IPC directory, as the nanoclaw MCP tools write
		// it; recorded in $TESTAGENT_LOG (if set) once it is in place.
		dir := ipcDir().Messages()
		name := fmt.Sprintf("%d-%s.json", time.Now().UnixNano(), strings.ReplaceAll(arg, " ", "_"))
		b, _ := json.Marshal(map[string]string{"type": "message", "chatJid": os.Getenv(protocol.EnvChatJID),
			"text": "ipc " + arg, "token": os.Getenv(protocol.EnvIPCToken)})
		if err := os.WriteFile(filepath.Join(dir, name+".tmp"), b, 0o600); err != nil {
			fatal("write IPC file: %v", err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			fatal("publish IPC file: %v", err)
		}
		if log := os.Getenv("TESTAGENT_LOG"); log != "" {
			f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintf(f, "ipc %s\n", arg)
				f.Close()
			}
		}
		result("queued "+arg, "")
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
	case "silent":
	case "violation":
		kind, target, _ := strings.Cut(arg, " ")
		frame(protocol.ViolationFrame(protocol.Violation{Kind: kind, Tool: "Bash", Target: target, Detail: "testagent"}))
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
		followup(in.SessionID)
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

func noise() {
	fmt.Println("starting up, not a frame")
	start, end := protocol.FrameStart, protocol.FrameEnd
	fmt.Println(start) // a start with no end…
	fmt.Println(start) // …then a real frame
	fmt.Println(`{"status":"success","result":"one"}`)
	fmt.Println(end)
	fmt.Println(start) // two payload lines: not a frame
	fmt.Println(`{"status":"success",`)
	fmt.Println(`"result":"never"}`)
	fmt.Println(end)
	fmt.Println(start) // bad JSON: dropped
	fmt.Println(`{not json`)
	fmt.Println(end)
	fmt.Println(start)
	fmt.Println(`{"status":"success","result":null}`)
	fmt.Println(end)
	result("two", "")
	fmt.Print("trailing text without newline")
}

func flood(mib int) {
	big := strings.Repeat("x", 2<<20)
	frame(protocol.Result(big))
	fmt.Println(big + big[:1<<20])
	line := strings.Repeat("flood ", 170) + "\n" // ~1 KiB
	chunk := strings.Repeat(line, 64)
	for n := 0; n < mib*16; n++ {
		os.Stdout.WriteString(chunk)
		os.Stderr.WriteString(chunk)
	}
}

func fork(next string, in input, raw []byte) {
	self, err := os.Executable()
	if err != nil {
		fatal("%v", err)
	}
	c := exec.Command(self)
	c.Env = append(os.Environ(), "TESTAGENT_ROLE=grandchild")
	c.Stdout, c.Stderr = os.Stdout, os.Stderr // holds the pipes open, like a stray tool would
	if err := c.Start(); err != nil {
		fatal("starting the grandchild: %v", err)
	}
	result(fmt.Sprintf("forked %d", c.Process.Pid), "")
	if next != "" {
		do(next, in, raw)
	}
}

func followup(session string) {
	dir := ipcDir().Input()
	result("ready", session)
	for {
		ents, err := os.ReadDir(dir)
		if err != nil {
			fatal("reading %s: %v", dir, err)
		}
		var files []string
		closing := false
		for _, e := range ents {
			switch {
			case e.Name() == layout.CloseFile:
				closing = true
			case strings.HasSuffix(e.Name(), ".json"):
				files = append(files, e.Name())
			}
		}
		sort.Strings(files)
		for _, f := range files {
			p := filepath.Join(dir, f)
			text, ok, err := protocol.ReadFollowUp(p)
			if err != nil {
				fatal("%v", err)
			}
			if !ok {
				fatal("bad follow-up %s", f)
			}
			os.Remove(p)
			result("followup: "+text, session)
		}
		if closing && len(files) == 0 {
			os.Remove(ipcDir().Close())
			result("closed", session)
			return
		}
		time.Sleep(10 * time.Millisecond) // a stand-in agent may poll; the daemon never does
	}
}

func fatal(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "testagent: "+format+"\n", args...)
	os.Exit(2)
}
