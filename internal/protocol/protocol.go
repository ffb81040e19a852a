// Package protocol is what the daemon and an agent process say to each
// other (docs/protocol.md): the NANOCLAW_* environment of a run, the
// ContainerInput on its stdin, the frames on its stdout, the follow-up
// files in its IPC directory's input/, and the request files its nanoclaw
// MCP tools write there with the verdicts they read back (request.go;
// layout.IPCDir names the directories). The
// daemon (router, runner), `nanoclawd mcp` and the test agents share these
// types; the TypeScript agent runner (agent-runner/src) speaks the same
// protocol and must change with this file.
package protocol

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// The environment of a run, built from scratch by the daemon. Besides
// these: PATH, HOME, TZ (when timezone is set) and the names in agent.env.
const (
	EnvGroupFolder  = "NANOCLAW_GROUP_FOLDER"  // the group's folder name
	EnvChatJID      = "NANOCLAW_CHAT_JID"      // the group's chat
	EnvIsMain       = "NANOCLAW_IS_MAIN"       // "1" or "0"
	EnvGroupDir     = "NANOCLAW_GROUP_DIR"     // absolute path of the group's folder (the cwd)
	EnvIPCDir       = "NANOCLAW_IPC_DIR"       // absolute path of <dataDir>/ipc/<folder>
	EnvIPCToken     = "NANOCLAW_IPC_TOKEN"     // this run's secret, signing its IPC files
	EnvBin          = "NANOCLAW_BIN"           // this nanoclawd, for `nanoclawd mcp`
	EnvSessionDir   = "NANOCLAW_SESSION_DIR"   // <dataDir>/sessions/<folder>, the CLI's state
	EnvGlobalMemory = "NANOCLAW_GLOBAL_MEMORY" // non-main only: the shared CLAUDE.md
	EnvHostHome     = "NANOCLAW_HOST_HOME"     // confined only: the owner's home, what "~" in denyRead means
)

// Env is the NANOCLAW_* environment of one run. Empty fields are left out.
type Env struct {
	GroupFolder  string
	ChatJID      string
	IsMain       bool
	GroupDir     string
	IPCDir       string
	IPCToken     string
	Bin          string
	SessionDir   string
	GlobalMemory string
	HostHome     string
}

// Vars is e as environment variables.
func (e Env) Vars() map[string]string {
	m := map[string]string{EnvIsMain: "0"}
	if e.IsMain {
		m[EnvIsMain] = "1"
	}
	for name, v := range map[string]string{
		EnvGroupFolder: e.GroupFolder, EnvChatJID: e.ChatJID, EnvGroupDir: e.GroupDir, EnvIPCDir: e.IPCDir,
		EnvIPCToken: e.IPCToken, EnvBin: e.Bin, EnvSessionDir: e.SessionDir, EnvGlobalMemory: e.GlobalMemory,
		EnvHostHome: e.HostHome,
	} {
		if v != "" {
			m[name] = v
		}
	}
	return m
}

// ReadEnv is the run's environment as getenv (os.Getenv) reports it.
func ReadEnv(getenv func(string) string) Env {
	return Env{
		GroupFolder: getenv(EnvGroupFolder), ChatJID: getenv(EnvChatJID), IsMain: getenv(EnvIsMain) == "1",
		GroupDir: getenv(EnvGroupDir), IPCDir: getenv(EnvIPCDir), IPCToken: getenv(EnvIPCToken), Bin: getenv(EnvBin),
		SessionDir: getenv(EnvSessionDir), GlobalMemory: getenv(EnvGlobalMemory), HostHome: getenv(EnvHostHome),
	}
}

// Require says which of names getenv has empty, as an error that tells
// how the process is meant to be started; nil when all are set.
func Require(getenv func(string) string, who string, names ...string) error {
	var missing []string
	for _, name := range names {
		if getenv(name) == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: %s not set; this command is started by the agent runner inside a run, not by hand", who, strings.Join(missing, ", "))
	}
	return nil
}

// ContainerInput is the one JSON object written to the agent's stdin,
// followed by EOF.
type ContainerInput struct {
	Prompt          string          `json:"prompt"`
	SessionID       string          `json:"sessionId,omitempty"`
	GroupFolder     string          `json:"groupFolder"`
	ChatJID         string          `json:"chatJid"`
	IsMain          bool            `json:"isMain"`
	IsScheduledTask bool            `json:"isScheduledTask,omitempty"`
	AssistantName   string          `json:"assistantName"`
	Security        json.RawMessage `json:"security,omitempty"` // the resolved policy; nil for main
	SDKOptions      json.RawMessage `json:"sdkOptions"`         // handed to the SDK's query() as they are
	// Standby: started ahead of a message; the prompt comes as the first
	// follow-up file (Prompt is empty).
	Standby bool `json:"standby,omitempty"`
}

// A frame is exactly three lines on the agent's stdout: FrameStart, one
// line of JSON (a Frame), FrameEnd. Any other line is log.
const (
	FrameStart = "---NANOCLAW_OUTPUT_START---"
	FrameEnd   = "---NANOCLAW_OUTPUT_END---"
)

// Frame types, and a result frame's statuses.
const (
	FrameResult    = ""          // no "type": a result
	FrameViolation = "violation" // a blocked action
	StatusSuccess  = "success"
	StatusError    = "error"
)

// Violation actions. An agent's frame may say either, but the daemon
// records every violation frame as "reported" — the agent's word, which it
// can make up; "blocked" is for what nanoclawd refused itself (its sandbox,
// gateway, IPC checks, limits, links in a group's directories).
const (
	ActionBlocked  = "blocked"
	ActionReported = "reported"
)

// Frame is the JSON of any frame: a result (Type "") or a violation.
type Frame struct {
	Type string `json:"type,omitempty"`
	// A result: Status, Result (text for the chat; null when the agent has
	// nothing to say), NewSessionID, Error.
	Status       string  `json:"status,omitempty"`
	Result       *string `json:"result"`
	NewSessionID string  `json:"newSessionId,omitempty"`
	Error        string  `json:"error,omitempty"`
	// CostUSD, on a result, is the agent's own estimate of the run's cost
	// so far (the SDK's total_cost_usd); optional, older agents omit it.
	CostUSD *float64 `json:"costUSD,omitempty"`
	Violation
}

// Violation is what a violation frame says besides its type.
type Violation struct {
	Kind   string `json:"kind,omitempty"` // filesystem, network, permission, tool
	Tool   string `json:"tool,omitempty"`
	Target string `json:"target,omitempty"` // a path or a host
	Detail string `json:"detail,omitempty"`
	Action string `json:"action,omitempty"` // what the agent claims; recorded as ActionReported whatever it says
}

// ViolationFrame is the payload of a violation frame (no "result").
func ViolationFrame(v Violation) any {
	return struct {
		Type string `json:"type"`
		Violation
	}{FrameViolation, v}
}

// EncodeFrame is payload (a Frame, or any JSON object) as the three lines
// of one frame.
func EncodeFrame(payload any) ([]byte, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("frame: %w", err)
	}
	out := make([]byte, 0, len(FrameStart)+len(b)+len(FrameEnd)+3)
	out = append(append(out, FrameStart+"\n"...), b...)
	return append(out, "\n"+FrameEnd+"\n"...), nil
}

// WriteFrame writes payload as one frame, in one write.
func WriteFrame(w io.Writer, payload any) error {
	b, err := EncodeFrame(payload)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Result is a result frame carrying text for the chat.
func Result(text string) Frame { return Frame{Status: StatusSuccess, Result: &text} }

// FollowUp is one file in <ipc>/input/: a message for the running agent,
// written as <time>-<rand>.json.tmp and renamed to .json, so names sort in
// the order they were written. An empty input/_close asks it to finish.
type FollowUp struct {
	Type string `json:"type"` // FollowUpMessage
	Text string `json:"text"`
}

// FollowUpMessage is the only follow-up type.
const FollowUpMessage = "message"

// ReadFollowUp reads one follow-up file; ok is false for a file that is
// not a follow-up message.
func ReadFollowUp(path string) (text string, ok bool, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false, err
	}
	var f FollowUp
	if json.Unmarshal(b, &f) != nil || f.Type != FollowUpMessage {
		return "", false, nil
	}
	return f.Text, true, nil
}
