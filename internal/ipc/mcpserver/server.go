// Package mcpserver is `nanoclawd mcp`: the stdio MCP server the agent
// runner starts for each run. Its tools never act themselves; they write
// IPC files, with the run's token, for the daemon's watcher to check and
// carry out.
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

// Env is the run the server speaks for, from the agent's environment.
type Env = protocol.Env

// EnvFromOS reads the NANOCLAW_* variables the daemon sets for a run.
func EnvFromOS() (Env, error) {
	err := protocol.Require(os.Getenv, "nanoclawd mcp", protocol.EnvIPCDir, protocol.EnvIPCToken, protocol.EnvGroupFolder, protocol.EnvChatJID)
	return protocol.ReadEnv(os.Getenv), err
}

// Run serves MCP over in/out until the client disconnects or ctx ends.
func Run(ctx context.Context, in io.Reader, out io.Writer) error {
	env, err := EnvFromOS()
	if err != nil {
		return err
	}
	t := &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}}
	if err := NewServer(env).Run(ctx, t); err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("nanoclawd mcp: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// NewServer returns the nanoclaw MCP server for env; register_group is
// listed only for the main group.
func NewServer(env Env) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "nanoclaw", Version: "1"}, nil)
	t := &tools{env: env}
	mcp.AddTool(s, &mcp.Tool{Name: "send_message", Description: "Send a message to the chat now, while you keep working. " +
		"Without chatJid it goes to this group's chat" + ifMain(env, "; as the main group you may name any chat") + ". " +
		"With file, a file of your own folder goes with it (the text is its caption)."}, t.sendMessage)
	mcp.AddTool(s, &mcp.Tool{Name: "react", Description: "React to a message of the chat with an emoji, as people do in WhatsApp: " +
		"message_id is the id attribute of a <message> in your prompt. Without chatJid it is this group's chat" +
		ifMain(env, "; as the main group you may name any chat") + "."}, t.react)
	mcp.AddTool(s, &mcp.Tool{Name: "schedule_task", Description: "Schedule a prompt to run later as a task. " +
		"schedule_type cron: schedule_value is 5 cron fields in local time (\"0 9 * * 1-5\" = weekdays 9:00); " +
		"interval: milliseconds between runs (\"3600000\" = hourly); once: local time \"YYYY-MM-DDTHH:MM:SS\". " +
		"context_mode group (default) runs with the group's conversation, isolated without it." +
		ifMain(env, " As the main group you may target another registered group with targetJid.")}, t.scheduleTask)
	mcp.AddTool(s, &mcp.Tool{Name: "list_tasks", Description: "List the scheduled tasks" +
		ifMain(env, " of every group") + " with their ids, schedules and status."}, t.listTasks)
	mcp.AddTool(s, &mcp.Tool{Name: "pause_task", Description: "Pause a scheduled task until it is resumed."}, t.taskOp(protocol.TypePauseTask, "paused"))
	mcp.AddTool(s, &mcp.Tool{Name: "resume_task", Description: "Resume a paused task."}, t.taskOp(protocol.TypeResumeTask, "resumed"))
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_task", Description: "Cancel a scheduled task for good."}, t.taskOp(protocol.TypeCancelTask, "cancelled"))
	mcp.AddTool(s, &mcp.Tool{Name: "update_task", Description: "Change a task's prompt or schedule (same formats as schedule_task)."}, t.updateTask)
	mcp.AddTool(s, &mcp.Tool{Name: "search_history", Description: "Search this chat's whole history, months back: what people wrote " +
		"and what you answered, newest first, with sender, time and message id. query is plain words, all of which must occur " +
		"(no operators or quotes: they are searched as text). since/until narrow it to a time (2026-03-01 or an RFC 3339 time); " +
		"limit 1-100, default 20." + ifMain(env, " As the main group you may search any registered chat with chatJid.")}, t.searchHistory)
	if env.IsMain {
		mcp.AddTool(s, &mcp.Tool{Name: "register_group", Description: "Register a chat as a group with its own folder and agent. " +
			"Find the chat's jid in available_groups.json. folder: 1-64 letters, digits, _ or -."}, t.registerGroup)
	}
	return s
}

func ifMain(env Env, s string) string {
	if env.IsMain {
		return s
	}
	return ""
}

type tools struct{ env Env }

type none struct{}

// VerdictWait bounds how long a tool waits for the daemon's answer.
var VerdictWait = 5 * time.Second

// write validates req as the daemon will (its form and size; whether the
// group may do it is the daemon's to decide, and to record), writes it
// atomically — a .tmp file renamed into place, so the watcher never reads
// half a file — and waits up to VerdictWait for the daemon's answer. done
// is what the agent is told when the daemon carried it out.
func (t *tools) write(req protocol.Request, done string) (*mcp.CallToolResult, any, error) {
	return t.writeFor(req, func(protocol.Verdict) string { return done })
}

// writeFor is write with the reply made from the daemon's verdict.
func (t *tools) writeFor(req protocol.Request, done func(protocol.Verdict) string) (*mcp.CallToolResult, any, error) {
	req.Token = t.env.IPCToken
	data, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > protocol.MaxFileSize {
		return nil, nil, fmt.Errorf("the request is %d bytes, over the limit of %d (1 MiB); send less text, or split it", len(data), protocol.MaxFileSize)
	}
	if _, err := protocol.DecodeRequest(data, scheduler.Validate); err != nil {
		return nil, nil, errors.New(strings.TrimPrefix(err.Error(), protocol.ErrField.Error()+": "))
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	dir := filepath.Join(t.env.IPCDir, protocol.Dir(req.Type))
	name := fmt.Sprintf("%d-%s.json", time.Now().UnixNano(), hex.EncodeToString(b[:]))
	_ = os.MkdirAll(layout.IPCDir(t.env.IPCDir).Results(), 0o700)
	if err := atomicfile.Write(filepath.Join(dir, name), data, 0o600); err != nil {
		return nil, nil, fmt.Errorf("could not write the request (%w); the IPC directory may be missing, try again later", err)
	}
	v, ok := protocol.AwaitVerdict(t.env.IPCDir, name, VerdictWait)
	switch {
	case !ok:
		return text("Queued: nanoclawd has not handled it yet; it will when it can. Do not send it again."), nil, nil
	case v.Status == "refused":
		return nil, nil, fmt.Errorf("refused: %s", v.Reason)
	}
	return text(done(v)), nil, nil
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

type sendMessageIn struct {
	Text    string `json:"text" jsonschema:"the message text (with file: its caption)"`
	ChatJID string `json:"chatJid,omitempty" jsonschema:"the chat to send to; leave out for this group's chat"`
	File    string `json:"file,omitempty" jsonschema:"a file of your folder to send with the text: a path relative to your working directory, or absolute inside it; PNG and JPEG show as pictures, anything else as a document; at most 16 MiB"`
}

func (t *tools) sendMessage(_ context.Context, _ *mcp.CallToolRequest, in sendMessageIn) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.Text) == "" {
		return nil, nil, errors.New("text is empty; give the message to send")
	}
	chat := in.ChatJID
	if chat == "" {
		chat = t.env.ChatJID
	}
	// Whether this group may send there is the daemon's to decide: a
	// refusal is then audited and alerted like any other.
	done := "Message sent."
	if in.File != "" {
		done = fmt.Sprintf("Message sent with %s.", filepath.Base(in.File))
	}
	return t.write(protocol.Request{Type: protocol.TypeMessage, ChatJID: chat, Text: in.Text, File: in.File}, done)
}

type reactIn struct {
	MessageID string `json:"message_id" jsonschema:"the id of the message to react to, from the prompt"`
	Emoji     string `json:"emoji" jsonschema:"one emoji, e.g. 👍"`
	ChatJID   string `json:"chatJid,omitempty" jsonschema:"the chat of that message; leave out for this group's chat"`
}

func (t *tools) react(_ context.Context, _ *mcp.CallToolRequest, in reactIn) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.Emoji) == "" || in.MessageID == "" {
		return nil, nil, errors.New("give message_id (from the prompt) and an emoji")
	}
	chat := in.ChatJID
	if chat == "" {
		chat = t.env.ChatJID
	}
	return t.write(protocol.Request{Type: protocol.TypeReaction, ChatJID: chat, MessageID: in.MessageID, Emoji: in.Emoji},
		fmt.Sprintf("Reacted %s to %s.", in.Emoji, in.MessageID))
}

type scheduleIn struct {
	Prompt        string `json:"prompt" jsonschema:"what the agent should do when the task runs"`
	ScheduleType  string `json:"schedule_type" jsonschema:"cron, interval or once"`
	ScheduleValue string `json:"schedule_value" jsonschema:"cron fields, milliseconds, or local YYYY-MM-DDTHH:MM:SS"`
	ContextMode   string `json:"context_mode,omitempty" jsonschema:"group (default) or isolated"`
	TargetJID     string `json:"targetJid,omitempty" jsonschema:"main group only: the registered group the task runs in"`
}

func (t *tools) scheduleTask(_ context.Context, _ *mcp.CallToolRequest, in scheduleIn) (*mcp.CallToolResult, any, error) {
	if in.ContextMode == "" {
		in.ContextMode = protocol.ContextGroup
	}
	return t.writeFor(protocol.Request{Type: protocol.TypeScheduleTask, Prompt: in.Prompt, ScheduleType: in.ScheduleType,
		ScheduleValue: in.ScheduleValue, ContextMode: in.ContextMode, TargetJID: in.TargetJID},
		func(v protocol.Verdict) string {
			return fmt.Sprintf("Task %s scheduled (%s %s).", v.ID, in.ScheduleType, in.ScheduleValue)
		})
}

type taskIn struct {
	TaskID string `json:"task_id" jsonschema:"the task's id, from list_tasks"`
}

func (t *tools) taskOp(typ, done string) mcp.ToolHandlerFor[taskIn, any] {
	return func(_ context.Context, _ *mcp.CallToolRequest, in taskIn) (*mcp.CallToolResult, any, error) {
		return t.write(protocol.Request{Type: typ, TaskID: in.TaskID}, fmt.Sprintf("Task %s %s.", in.TaskID, done))
	}
}

type updateIn struct {
	TaskID        string `json:"task_id" jsonschema:"the task's id, from list_tasks"`
	Prompt        string `json:"prompt,omitempty" jsonschema:"the new prompt"`
	ScheduleType  string `json:"schedule_type,omitempty" jsonschema:"the new schedule type (give schedule_value with it)"`
	ScheduleValue string `json:"schedule_value,omitempty" jsonschema:"the new schedule value"`
}

func (t *tools) updateTask(_ context.Context, _ *mcp.CallToolRequest, in updateIn) (*mcp.CallToolResult, any, error) {
	if in.Prompt == "" && in.ScheduleType == "" && in.ScheduleValue == "" {
		return nil, nil, errors.New("nothing to update; give prompt, or schedule_type with schedule_value")
	}
	return t.write(protocol.Request{Type: protocol.TypeUpdateTask, TaskID: in.TaskID, Prompt: in.Prompt,
		ScheduleType: in.ScheduleType, ScheduleValue: in.ScheduleValue}, fmt.Sprintf("Task %s updated.", in.TaskID))
}

type registerIn struct {
	JID             string   `json:"jid" jsonschema:"the chat's jid, from available_groups.json"`
	Name            string   `json:"name" jsonschema:"display name"`
	Folder          string   `json:"folder" jsonschema:"folder name: 1-64 letters, digits, _ or -"`
	Trigger         string   `json:"trigger,omitempty" jsonschema:"trigger word, default @ plus the assistant's name"`
	RequiresTrigger *bool    `json:"requiresTrigger,omitempty" jsonschema:"false: every message reaches the agent"`
	Senders         []string `json:"senders,omitempty" jsonschema:"only these may call the assistant there (phone numbers); others' messages stay context"`
}

func (t *tools) registerGroup(_ context.Context, _ *mcp.CallToolRequest, in registerIn) (*mcp.CallToolResult, any, error) {
	return t.write(protocol.Request{Type: protocol.TypeRegisterGroup, JID: in.JID, Name: in.Name, Folder: in.Folder,
		Trigger: in.Trigger, RequiresTrigger: in.RequiresTrigger, Senders: in.Senders}, fmt.Sprintf("Group %s registered in folder %s.", in.Name, in.Folder))
}

func (t *tools) listTasks(_ context.Context, _ *mcp.CallToolRequest, _ none) (*mcp.CallToolResult, any, error) {
	data, err := os.ReadFile(layout.IPCDir(t.env.IPCDir).TasksSnapshot())
	if errors.Is(err, os.ErrNotExist) {
		return text("No scheduled tasks."), nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("could not read the task list: %w", err)
	}
	var tasks []scheduler.Task
	if err := json.Unmarshal(data, &tasks); err != nil {
		return nil, nil, fmt.Errorf("the task list is damaged (%v); try again after the next run", err)
	}
	if len(tasks) == 0 {
		return text("No scheduled tasks."), nil, nil
	}
	var b strings.Builder
	for _, task := range tasks {
		next := "none"
		if task.NextRun != nil {
			next = task.NextRun.Format(time.RFC3339)
		}
		fmt.Fprintf(&b, "- [%s] %s (%s: %s) %s, next run %s: %s\n", task.ID, task.GroupFolder, task.ScheduleType,
			task.ScheduleValue, task.Status, next, task.Prompt)
	}
	return text(b.String()), nil, nil
}
