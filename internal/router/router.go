// Package router turns inbound messages into agent runs and their answers
// into replies: sink.go takes what channels deliver, run.go does the
// queue's jobs, attempt.go readies, runs and settles one agent of a run
// (package spec says what it is started with), agent.go handles what the
// agent says, cursor.go keeps what it was handed and answered, adopt.go
// hands a run an agent started ahead (package standby keeps them). A run's
// sandbox is built by package confine; the files messages bring are kept
// by package media; an agent's error is put in words by package failure.
package router

import (
	"context"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/confine"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/media"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/prompt"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// The parts the router drives, declared as it uses them.
type (
	// Groups looks registered groups up.
	Groups interface {
		ByJID(ctx context.Context, jid string) (groups.Group, error)
		ByFolder(ctx context.Context, folder string) (groups.Group, error)
		List(ctx context.Context) ([]groups.Group, error)
	}
	// Queue starts runs and knows which are going.
	Queue interface {
		EnqueueMessages(folder string)
		Running(folder string) bool
	}
	// Tokens issues the per-run IPC secret.
	Tokens interface {
		Issue(ctx context.Context, folder string) (string, error)
		Finish(ctx context.Context, token string) error
	}
	// Tasks is the scheduler, for task runs.
	Tasks interface {
		Get(ctx context.Context, id string) (scheduler.Task, error)
		Done(ctx context.Context, taskID, result string, runErr error) error
	}
	// Typing shows that the assistant is at work in a chat (best effort).
	Typing interface {
		SetTyping(ctx context.Context, jid string, on bool)
	}
	// Snapshots writes the files an agent reads in its IPC directory.
	Snapshots interface {
		Refresh(ctx context.Context, folder string, isMain bool) error
	}
	// Owner takes the owner's commands (/allow, /pause, …) from the main
	// chat, reporting whether m was one.
	Owner interface {
		Handle(ctx context.Context, g groups.Group, m channel.Message) (bool, error)
	}
	// Proof is the start-time proof of the confinement (`nanoclawd
	// security test`): non-main runs wait for its verdict and fail closed
	// on an error.
	Proof interface {
		Wait(ctx context.Context) error
	}
	// Ledger keeps the marks of running agents and each group's last run.
	Ledger interface {
		Mark(ctx context.Context, folder string, pid int) (int, error)
		Unmark(ctx context.Context, pgid int) error
		RecordLastRun(ctx context.Context, r runner.LastRun) error
	}
)

// Router is the channel.Sink of every channel and the queue's worker.
type Router struct {
	Messages *messages.Store
	Groups   Groups
	Config   func() *config.Config // the current config (it may be reloaded)
	Queue    Queue
	Outbox   *outbox.Outbox
	Reporter security.Reporter
	Tokens   Tokens
	Tasks    Tasks
	Ledger   Ledger
	Typing   Typing // may be nil
	Owner    Owner  // may be nil
	Binary   string // this nanoclawd, for the agent's MCP server
	Log      zerolog.Logger
	// Snapshots, if set, refreshes the files an agent reads in its IPC
	// directory before each run.
	Snapshots Snapshots
	// Media keeps the files messages bring, and transcribes voice notes.
	Media *media.Inbound
	// Usage keeps what every run's relay counts (usage.Meter).
	Usage *usage.Store
	// Proof, if set, is waited for before each non-main run.
	Proof Proof
	// Placeholders, if set, keeps the mount points of missing protected
	// names between confined runs.
	Placeholders *sandbox.Placeholders
	// Metrics, if set, is told how long runs take and messages wait
	// (metrics.go).
	Metrics Observer

	// sockets has each confined run's gateway socket made ahead of it;
	// CloseSockets removes the one made last.
	sockets confine.Sockets

	standbys  standbys      // agents started ahead (adopt.go)
	owner     ownerNotes    // failures the main chat was told of (failure.go)
	upstreams gateway.Board // model upstreams that failed lately, for every run's relay
	unheard   unregistered  // messages from chats no group has (unregistered.go)
	arrived   arrivals      // when each chat's newest message came (metrics.go)
	// budgetChecks are the meters' checks after answers (usage.Meter.Done).
	budgetChecks sync.WaitGroup
}

// Pending lists the folders of groups with unanswered messages, so that a
// start picks up what a stop left.
func (r *Router) Pending(ctx context.Context) ([]string, error) {
	list, err := r.Groups.List(ctx)
	if err != nil {
		return nil, err
	}
	jids := make([]string, len(list))
	for i, g := range list {
		jids[i] = g.JID
	}
	unanswered, err := r.Messages.UnansweredIn(ctx, jids)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range list {
		if msgs := unanswered[g.JID]; len(msgs) > 0 && !g.Paused && anyCalls(g, msgs) {
			out = append(out, g.Folder)
		}
	}
	return out, nil
}

func anyCalls(g groups.Group, msgs []messages.Stored) bool {
	for _, m := range msgs {
		if m.ReactTo == "" && g.Calls(m.SenderJID, m.Text) {
			return true
		}
	}
	return false
}

// promptOf makes the prompt of msgs — at most agent.maxPromptMessages, the
// newest — and returns the highest seq it answers (all of msgs).
func (r *Router) promptOf(msgs []messages.Stored) (string, int64) {
	cfg := r.Config()
	var top int64
	for _, m := range msgs {
		top = max(top, m.Seq)
	}
	if n := cfg.Agent.MaxPromptMessages; n > 0 && len(msgs) > n {
		r.Log.Warn().Int("messages", len(msgs)).Int("kept", n).Int64("up_to_seq", top).
			Msg("a prompt holds only the newest agent.maxPromptMessages messages; the older ones count as answered without the agent seeing them")
		msgs = msgs[len(msgs)-n:]
	}
	pm := make([]prompt.Message, len(msgs))
	for i, m := range msgs {
		pm[i] = prompt.Message{ID: m.ID, SenderName: m.SenderName, Time: m.Time, Text: m.Text, Media: m.Media,
			QuotedID: m.QuotedID, QuotedSender: m.QuotedSender, QuotedText: m.QuotedText, ReactTo: m.ReactTo}
	}
	return prompt.Format(pm, cfg.Location()), top
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
