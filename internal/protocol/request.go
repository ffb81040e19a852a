package protocol

// Requests: the JSON files an agent's nanoclaw MCP server writes into its
// IPC directory's messages/ and tasks/ (layout.IPCDir), and the verdict the
// daemon writes back into results/. The daemon's watcher (internal/ipc)
// decodes them with DecodeRequest and adds the checks that need its own
// rooms (a schedule the scheduler parses, a folder name the registry
// accepts).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// MaxFileSize is the largest IPC file handled; larger ones are refused.
const MaxFileSize = 1 << 20

// A scheduled task's context_mode: the group's conversation, or a fresh one.
const (
	ContextGroup    = "group"
	ContextIsolated = "isolated"
)

// Request types (the "type" field).
const (
	TypeMessage       = "message"
	TypeReaction      = "reaction"
	TypeScheduleTask  = "schedule_task"
	TypePauseTask     = "pause_task"
	TypeResumeTask    = "resume_task"
	TypeCancelTask    = "cancel_task"
	TypeUpdateTask    = "update_task"
	TypeRegisterGroup = "register_group"
	TypeRefreshGroups = "refresh_groups"
	TypeSearchHistory = "search_history"
)

// Request is one IPC file. An empty string means the field was absent:
// Decode refuses present-but-empty strings, so the two never differ.
type Request struct {
	Type            string   `json:"type"`
	ChatJID         string   `json:"chatJid,omitempty"`
	Text            string   `json:"text,omitempty"`
	File            string   `json:"file,omitempty"`      // message: a file of the group's folder to send, Text its caption
	MessageID       string   `json:"messageId,omitempty"` // reaction: the chat's message reacted to
	Emoji           string   `json:"emoji,omitempty"`     // reaction: the emoji
	Prompt          string   `json:"prompt,omitempty"`
	ScheduleType    string   `json:"schedule_type,omitempty"`
	ScheduleValue   string   `json:"schedule_value,omitempty"`
	ContextMode     string   `json:"context_mode,omitempty"`
	TargetJID       string   `json:"targetJid,omitempty"`
	TaskID          string   `json:"taskId,omitempty"`
	JID             string   `json:"jid,omitempty"`
	Name            string   `json:"name,omitempty"`
	Folder          string   `json:"folder,omitempty"`
	Trigger         string   `json:"trigger,omitempty"`
	RequiresTrigger *bool    `json:"requiresTrigger,omitempty"`
	Senders         []string `json:"senders,omitempty"` // register_group: who may call the new group's assistant
	Query           string   `json:"query,omitempty"`   // search_history: plain words
	Since           string   `json:"since,omitempty"`   // search_history: RFC 3339 or YYYY-MM-DD
	Until           string   `json:"until,omitempty"`   // search_history: RFC 3339 or YYYY-MM-DD
	Limit           string   `json:"limit,omitempty"`   // search_history: digits, 1 to MaxSearchLimit
	Token           string   `json:"token"`
}

// Dir is the directory a request of type typ is written to.
func Dir(typ string) string {
	if typ == TypeMessage || typ == TypeReaction {
		return layout.MessagesDir
	}
	return layout.TasksDir
}

// schema lists, per type, the fields besides type and token.
var schema = map[string]struct{ required, optional []string }{
	TypeMessage:       {required: []string{"chatJid", "text"}, optional: []string{"file"}},
	TypeReaction:      {required: []string{"chatJid", "messageId", "emoji"}},
	TypeScheduleTask:  {required: []string{"prompt", "schedule_type", "schedule_value", "context_mode"}, optional: []string{"targetJid"}},
	TypePauseTask:     {required: []string{"taskId"}},
	TypeResumeTask:    {required: []string{"taskId"}},
	TypeCancelTask:    {required: []string{"taskId"}},
	TypeUpdateTask:    {required: []string{"taskId"}, optional: []string{"prompt", "schedule_type", "schedule_value"}},
	TypeRegisterGroup: {required: []string{"jid", "name", "folder"}, optional: []string{"trigger", "requiresTrigger", "senders"}},
	TypeRefreshGroups: {},
	TypeSearchHistory: {required: []string{"query"}, optional: []string{"chatJid", "since", "until", "limit"}},
}

// setters put one decoded value into a Request; requiresTrigger is the
// only field that is not a string.
var setters = map[string]func(*Request, any) bool{
	"chatJid":        str(func(r *Request) *string { return &r.ChatJID }),
	"text":           str(func(r *Request) *string { return &r.Text }),
	"file":           str(func(r *Request) *string { return &r.File }),
	"messageId":      str(func(r *Request) *string { return &r.MessageID }),
	"emoji":          str(func(r *Request) *string { return &r.Emoji }),
	"prompt":         str(func(r *Request) *string { return &r.Prompt }),
	"schedule_type":  str(func(r *Request) *string { return &r.ScheduleType }),
	"schedule_value": str(func(r *Request) *string { return &r.ScheduleValue }),
	"context_mode":   str(func(r *Request) *string { return &r.ContextMode }),
	"targetJid":      str(func(r *Request) *string { return &r.TargetJID }),
	"taskId":         str(func(r *Request) *string { return &r.TaskID }),
	"jid":            str(func(r *Request) *string { return &r.JID }),
	"name":           str(func(r *Request) *string { return &r.Name }),
	"folder":         str(func(r *Request) *string { return &r.Folder }),
	"trigger":        str(func(r *Request) *string { return &r.Trigger }),
	"query":          str(func(r *Request) *string { return &r.Query }),
	"since":          str(func(r *Request) *string { return &r.Since }),
	"until":          str(func(r *Request) *string { return &r.Until }),
	"limit":          str(func(r *Request) *string { return &r.Limit }),
	"requiresTrigger": func(r *Request, v any) bool {
		b, ok := v.(bool)
		r.RequiresTrigger = &b
		return ok
	},
	"senders": func(r *Request, v any) bool {
		list, ok := v.([]string)
		r.Senders = list
		return ok && len(list) > 0 && len(list) <= maxSenders && !slices.ContainsFunc(list, func(s string) bool { return s == "" || len(s) > 256 })
	},
}

// maxSenders bounds register_group's senders list.
const maxSenders = 256

func str(field func(*Request) *string) func(*Request, any) bool {
	return func(r *Request, v any) bool {
		s, ok := v.(string)
		*field(r) = s
		return ok && s != ""
	}
}

// Decode errors. Each returned error wraps exactly one of them.
var (
	ErrSyntax      = errors.New("not a JSON object")
	ErrNoToken     = errors.New("missing token")
	ErrUnknownType = errors.New("unknown type")
	ErrField       = errors.New("invalid field")
)

// DecodeRequest parses an IPC file strictly: one JSON object of strings
// (and the boolean requiresTrigger, and the string list senders), no
// duplicate, unknown or differently-cased keys, nothing after it. schedule
// checks a task's schedule (scheduler.Validate: the daemon and the MCP
// server parse schedules alike). The token is filled in whenever the object
// parsed, even if another field is wrong, so the caller can tell who wrote
// a bad file.
func DecodeRequest(data []byte, schedule func(typ, value string) error) (Request, error) {
	var r Request
	obj, err := parseObject(data)
	if err != nil {
		return r, fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	if tok, ok := obj["token"].(string); ok {
		r.Token = tok
	}
	if r.Token == "" {
		return r, fmt.Errorf("%w: every file needs the run's \"token\" (NANOCLAW_IPC_TOKEN)", ErrNoToken)
	}
	typ, _ := obj["type"].(string)
	spec, ok := schema[typ]
	if !ok {
		return r, fmt.Errorf("%w %q: use one of message, reaction, schedule_task, pause_task, resume_task, cancel_task, update_task, register_group, refresh_groups, search_history", ErrUnknownType, typ)
	}
	r.Type = typ
	allowed := map[string]bool{"type": true, "token": true}
	for _, f := range spec.required {
		allowed[f] = true
		if _, ok := obj[f]; !ok {
			return r, fmt.Errorf("%w: %s needs %q", ErrField, typ, f)
		}
	}
	for _, f := range spec.optional {
		allowed[f] = true
	}
	for k, v := range obj {
		if !allowed[k] {
			return r, fmt.Errorf("%w: %s has no field %q", ErrField, typ, k)
		}
		if set := setters[k]; set != nil && !set(&r, v) {
			switch k {
			case "requiresTrigger":
				return r, fmt.Errorf("%w: %q must be true or false", ErrField, k)
			case "senders":
				return r, fmt.Errorf("%w: %q must be a list of 1 to %d non-empty strings (phone numbers or ids)", ErrField, k, maxSenders)
			}
			return r, fmt.Errorf("%w: %q must be a non-empty string", ErrField, k)
		}
	}
	if err := r.validate(schedule); err != nil {
		return r, fmt.Errorf("%w: %v", ErrField, err)
	}
	return r, nil
}

func (r *Request) validate(schedule func(typ, value string) error) error {
	for _, jid := range []string{r.ChatJID, r.TargetJID, r.JID} {
		if len(jid) > 256 || strings.ContainsFunc(jid, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
			return fmt.Errorf("chat id %.40q: no spaces or control characters, at most 256 bytes", jid)
		}
	}
	if len(r.File) > 4096 || strings.ContainsRune(r.File, 0) {
		return fmt.Errorf("file %.40q: a path of at most 4096 bytes, without NUL", r.File)
	}
	if len(r.MessageID) > 256 || strings.ContainsFunc(r.MessageID, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return fmt.Errorf("messageId %.40q: the id shown in the prompt, no spaces or control characters", r.MessageID)
	}
	if len(r.Emoji) > 32 || strings.ContainsFunc(r.Emoji, func(c rune) bool { return c < ' ' || c == 0x7f }) {
		return fmt.Errorf("emoji %.40q: one emoji, such as \"👍\"", r.Emoji)
	}
	if r.Type == TypeScheduleTask && r.ContextMode != ContextGroup && r.ContextMode != ContextIsolated {
		return fmt.Errorf("context_mode %q: use group or isolated", r.ContextMode)
	}
	if r.Type == TypeUpdateTask && r.ScheduleType != "" && r.ScheduleValue == "" {
		return errors.New("update_task: give schedule_value together with schedule_type")
	}
	if r.Type == TypeScheduleTask || (r.Type == TypeUpdateTask && r.ScheduleType != "") {
		return schedule(r.ScheduleType, r.ScheduleValue)
	}
	if r.Type == TypeRegisterGroup {
		return layout.ValidFolder(r.Folder)
	}
	if r.Type == TypeSearchHistory {
		_, err := r.Search(time.Local)
		return err
	}
	return nil
}

// parseObject reads one flat JSON object whose values are strings or
// booleans. encoding/json alone would accept duplicate keys, keys in the
// wrong case and trailing data; walking the tokens refuses all three.
func parseObject(data []byte) (map[string]any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("the file must hold one JSON object")
	}
	obj := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // inside an object the decoder only yields string keys here
		if _, dup := obj[key]; dup {
			return nil, fmt.Errorf("key %.40q appears twice", key)
		}
		tok, err = dec.Token()
		if err != nil {
			return nil, err
		}
		switch v := tok.(type) {
		case string, bool:
			obj[key] = v
		case json.Delim:
			if v != '[' {
				return nil, fmt.Errorf("value of %.40q must be a string, a boolean or a list of strings", key)
			}
			list, err := stringList(dec)
			if err != nil {
				return nil, fmt.Errorf("value of %.40q: %w", key, err)
			}
			obj[key] = list
		default:
			return nil, fmt.Errorf("value of %.40q must be a string, a boolean or a list of strings", key)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return obj, nil
}

// stringList reads the rest of a JSON array of strings, after its '['.
func stringList(dec *json.Decoder) ([]string, error) {
	list := []string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		s, ok := tok.(string)
		if !ok {
			return nil, errors.New("the list may hold only strings")
		}
		list = append(list, s)
	}
	_, err := dec.Token() // the closing bracket
	return list, err
}

// Verdict is what became of one request.
type Verdict struct {
	Status string `json:"status"` // "sent" (carried out), "ok" (a search answered) or "refused"
	Reason string `json:"reason,omitempty"`
	ID     string `json:"id,omitempty"` // schedule_task: the new task's id
	// Messages is a search_history's answer, newest first; a pointer so
	// that an answer with no match still says "messages": [].
	Messages *[]Found `json:"messages,omitempty"`
}

// AwaitVerdict waits up to wait for the daemon's answer to the request file
// name written in ipcDir, removes it and returns it; ok is false when none
// came in time (the file waits for the daemon).
func AwaitVerdict(ipcDir, name string, wait time.Duration) (v Verdict, ok bool) {
	path := filepath.Join(layout.IPCDir(ipcDir).Results(), name)
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(data, &v) == nil && v.Status != "" {
			os.Remove(path)
			return v, true
		}
		if (err != nil && !errors.Is(err, fs.ErrNotExist)) || time.Now().After(deadline) {
			return v, false
		}
	}
}
