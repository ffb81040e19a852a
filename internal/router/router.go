package router

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// The parts the router drives, declared as it uses them.
type (
	// Groups looks registered groups up.
	Groups interface {
		ByJID(ctx context.Context, jid string) (groups.Group, error)
		ByFolder(ctx context.Context, folder string) (groups.Group, error)
		List(ctx context.Context) ([]groups.Group, error)
	}
	// Queue starts runs.
	Queue interface{ EnqueueMessages(folder string) }
	// Outbox delivers what EnqueueTx queued once woken.
	Outbox interface{ Wake() }
	// Reporter records violations and alerts the main group.
	Reporter interface {
		Report(ctx context.Context, v alerts.Violation) error
	}
	// Tokens issues the per-run IPC secret.
	Tokens interface {
		Issue(ctx context.Context, folder string) (string, error)
		Finish(ctx context.Context, token string) error
	}
	// Tasks is the scheduler, for task runs.
	Tasks interface {
		Get(ctx context.Context, q scheduler.Querier, id string) (scheduler.Task, error)
		Done(ctx context.Context, taskID, result string, runErr error) error
	}
)

// Router is the channel.Sink of every channel and the queue's RunFunc.
type Router struct {
	DB       *sql.DB
	Groups   Groups
	Config   func() *config.Config // the current config (it may be reloaded)
	Queue    Queue
	Outbox   Outbox
	Reporter Reporter
	Tokens   Tokens
	Tasks    Tasks
	Typing   func(ctx context.Context, jid string, on bool) // best effort; may be nil
	Binary   string                                         // this nanoclawd, for the agent's MCP server
	Log      zerolog.Logger
	// BeforeRun, if set, is called before each agent run (to refresh the
	// files the agent reads).
	BeforeRun func(ctx context.Context, g groups.Group)
	// OnRunStart, if set, is called when an agent process has started (for
	// benchmarks and tests).
	OnRunStart func(folder string, pid int)

	warm warm // agents started ahead (warm.go)

	mu        sync.Mutex
	active    map[string]bool  // folders with a message run going
	attempted map[string]int64 // per folder, the highest seq its last message run was given
}

// lock takes r.mu, making the run state on first use.
func (r *Router) lock() {
	r.mu.Lock()
	if r.active == nil {
		r.active, r.attempted = map[string]bool{}, map[string]int64{}
	}
}

var _ channel.Sink = (*Router)(nil)

// OnChat records chat metadata for any chat, registered or not.
func (r *Router) OnChat(ctx context.Context, c channel.Chat) error {
	ms := c.Time.UnixMilli()
	if c.Time.IsZero() {
		ms = 0
	}
	_, err := r.DB.ExecContext(ctx, `INSERT INTO chats (jid, name, is_group, last_activity) VALUES (?, ?, ?, ?)
		ON CONFLICT (jid) DO UPDATE SET
			name = CASE WHEN excluded.name != '' THEN excluded.name ELSE chats.name END,
			is_group = excluded.is_group,
			last_activity = max(chats.last_activity, excluded.last_activity)`,
		c.JID, c.Name, c.IsGroup, ms)
	return err
}

// OnMessage stores m (content only for registered groups) and starts or
// feeds the group's agent when m calls for it. It returns once m is
// durable.
func (r *Router) OnMessage(ctx context.Context, m channel.Message) error {
	if m.Time.IsZero() {
		m.Time = time.Now()
	}
	if err := r.OnChat(ctx, channel.Chat{JID: m.ChatJID, Time: m.Time}); err != nil {
		return fmt.Errorf("store chat: %w", err)
	}
	g, err := r.Groups.ByJID(ctx, m.ChatJID)
	if errors.Is(err, groups.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if m.Image != nil {
		m.Text = r.saveImage(ctx, g, m)
	}
	if m.Replaces != "" || m.Revokes != "" {
		if done, err := r.onChange(ctx, g, &m); done || err != nil {
			return err
		}
	}
	res, err := r.DB.ExecContext(ctx, `INSERT OR IGNORE INTO messages (chat_jid, id, sender, sender_name, text, time, from_me, is_bot,
		quoted_sender, quoted_text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, m.ChatJID, m.ID, m.Sender, m.SenderName, m.Text,
		m.Time.UnixMilli(), m.FromMe, m.IsBot, m.QuotedSender, m.QuotedText)
	if err != nil {
		return fmt.Errorf("store message: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 || m.IsBot {
		return nil // a redelivery, or our own reply echoed back
	}
	cfg := r.Config()
	if word := cfg.Agent.NewSessionCommand; word != "" && strings.EqualFold(strings.TrimSpace(m.Text), word) && mayReset(g, m.Sender) {
		return r.newSession(ctx, g, res)
	}
	r.maybeRun(g, m.Sender, m.Text)
	return nil
}

// newSession handles the chat's "/new": the group's next run starts a
// fresh agent session. Everything said so far, this message included,
// counts as answered, together with the reply that says so.
func (r *Router) newSession(ctx context.Context, g groups.Group, res sql.Result) error {
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	if err := r.ClearSession(ctx, g.Folder); err != nil {
		return fmt.Errorf("clear the session of %s: %w", g.Folder, err)
	}
	r.Log.Info().Str("group", g.Folder).Msg("the chat asked for a new conversation")
	if r.isActive(g.Folder) {
		// The agent going now holds the old conversation: ask it to finish,
		// so the next message gets the fresh one without waiting for idle.
		if err := runner.Close(filepath.Join(r.Config().DataDir, "ipc", g.Folder)); err != nil {
			r.Log.Warn().Err(err).Str("group", g.Folder).Msg("ask the running agent to finish")
		}
	}
	return r.enqueue(ctx, g.JID, "Fresh start: the next message begins a new conversation.", alerts.KindNotice, g.JID, seq)
}

// KillLeftovers ends what agents of a previous daemon left running (a
// kill -9 of the daemon takes each agent with it, but not its children).
func (r *Router) KillLeftovers(ctx context.Context) error {
	rows, err := r.DB.QueryContext(ctx, `SELECT pgid, folder, start, boot_id FROM agent_marks`)
	if err != nil {
		return err
	}
	var marks []runner.Mark
	var folders []string
	for rows.Next() {
		var m runner.Mark
		var folder string
		if err := rows.Scan(&m.PGID, &folder, &m.Start, &m.BootID); err != nil {
			rows.Close()
			return err
		}
		marks, folders = append(marks, m), append(folders, folder)
	}
	rows.Close()
	for i, m := range marks {
		if n := runner.KillLeftovers(m); n > 0 {
			r.Log.Warn().Str("group", folders[i]).Int("processes", n).Msg("ended processes a previous agent left running")
		}
	}
	_, err = r.DB.ExecContext(ctx, `DELETE FROM agent_marks`)
	return err
}

// Pending lists the folders of groups with unanswered messages, so that a
// start picks up what a stop left.
func (r *Router) Pending(ctx context.Context) ([]string, error) {
	list, err := r.Groups.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range list {
		cursor, err := r.answered(ctx, r.DB, g.JID)
		if err != nil {
			return nil, err
		}
		msgs, err := r.after(ctx, g.JID, cursor)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 && anyCalls(g, msgs) {
			out = append(out, g.Folder)
		}
	}
	return out, nil
}

type stored struct {
	seq    int64
	sender string // the sender's id on its channel, for the senders allowlist
	PromptMessage
}

func (r *Router) answered(ctx context.Context, q scheduler.Querier, jid string) (int64, error) {
	var seq int64
	err := q.QueryRowContext(ctx, `SELECT answered_seq FROM cursors WHERE chat_jid = ?`, jid).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// after returns the chat's messages with seq > seq, oldest first by the
// chat's timestamp and then arrival (timestamps have one-second
// resolution on WhatsApp, so they alone cannot order a burst).
func (r *Router) after(ctx context.Context, jid string, seq int64) ([]stored, error) {
	rows, err := r.DB.QueryContext(ctx, `SELECT seq, sender, CASE WHEN sender_name != '' THEN sender_name ELSE sender END, time, text,
		quoted_sender, quoted_text
		FROM messages WHERE chat_jid = ? AND seq > ? AND is_bot = 0 ORDER BY time, seq`, jid, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s stored
		var ms int64
		if err := rows.Scan(&s.seq, &s.sender, &s.Sender, &ms, &s.Text, &s.QuotedSender, &s.QuotedText); err != nil {
			return nil, err
		}
		s.Time = time.UnixMilli(ms)
		out = append(out, s)
	}
	return out, rows.Err()
}

// calls tells whether a message calls g's assistant: in the main group
// every message does; elsewhere one from an allowed sender (the group's
// senders, when it has any) that holds the trigger, unless the group needs
// none. The rest stays context for the next call.
func calls(g groups.Group, sender, text string) bool {
	if g.IsMain {
		return true
	}
	if g.Security != nil && len(g.Security.Senders) > 0 && !security.SenderAllowed(g.Security.Senders, sender) {
		return false
	}
	return !g.RequiresTrigger || Triggers(text, g.Trigger)
}

// mayReset tells whether sender may start the group's conversation afresh:
// who may call its assistant, whatever the trigger.
func mayReset(g groups.Group, sender string) bool {
	return g.IsMain || g.Security == nil || len(g.Security.Senders) == 0 || security.SenderAllowed(g.Security.Senders, sender)
}

func anyCalls(g groups.Group, msgs []stored) bool {
	for _, m := range msgs {
		if calls(g, m.sender, m.Text) {
			return true
		}
	}
	return false
}

// promptOf makes the prompt of msgs — at most agent.maxPromptMessages, the
// newest — and returns the highest seq it answers (all of msgs).
func (r *Router) promptOf(msgs []stored) (string, int64) {
	cfg := r.Config()
	var top int64
	for _, m := range msgs {
		top = max(top, m.seq)
	}
	if n := cfg.Agent.MaxPromptMessages; n > 0 && len(msgs) > n {
		msgs = msgs[len(msgs)-n:]
	}
	pm := make([]PromptMessage, len(msgs))
	for i, m := range msgs {
		pm[i] = m.PromptMessage
	}
	return FormatPrompt(pm, cfg.Location()), top
}

// Run is the queue's RunFunc.
func (r *Router) Run(ctx context.Context, job runner.Job) error {
	if job.TaskID != "" {
		return r.runTask(ctx, job)
	}
	return r.runMessages(ctx, job)
}

func (r *Router) runMessages(ctx context.Context, job runner.Job) error {
	g, err := r.Groups.ByFolder(ctx, job.Folder)
	if errors.Is(err, groups.ErrNotFound) {
		return nil // unregistered since
	}
	if err != nil {
		return err
	}
	cursor, err := r.answered(ctx, r.DB, g.JID)
	if err != nil {
		return err
	}
	msgs, err := r.after(ctx, g.JID, cursor)
	if err != nil || len(msgs) == 0 {
		return err
	}
	if !anyCalls(g, msgs) {
		return nil // context only; it comes along with the next trigger
	}
	r.setActive(g.Folder, true)
	defer r.touchWarm(g.Folder) // after the run: the group gets an agent started ahead
	defer r.setActive(g.Folder, false)

	prompt, top := r.promptOf(msgs)
	r.lock()
	r.attempted[g.Folder] = top
	r.mu.Unlock()
	var run *agentRun
	stopFollow := make(chan struct{})
	followDone := make(chan struct{})
	if sb := r.takeStandby(ctx, g); sb != nil {
		run = sb.run
		err = r.adopt(ctx, sb, job, prompt, top, stopFollow, followDone)
	} else {
		run = &agentRun{router: r, group: g, replyTo: g.JID, batches: []int64{top}, delivered: top, useSession: true,
			started: make(chan struct{})}
		go func() {
			defer close(followDone)
			run.follow(ctx, job.More, stopFollow)
		}()
		err = run.start(ctx, job, prompt, false)
	}
	close(stopFollow)
	<-followDone
	if errors.Is(err, runner.ErrTimeout) {
		// The same prompt would hang again and cost another timeout.
		return runner.NoRetry(err)
	}
	return err
}

func (r *Router) isActive(folder string) bool {
	r.lock()
	defer r.mu.Unlock()
	return r.active[folder]
}

func (r *Router) setActive(folder string, on bool) {
	r.lock()
	defer r.mu.Unlock()
	if on {
		r.active[folder] = true
	} else {
		delete(r.active, folder)
	}
}

func (r *Router) runTask(ctx context.Context, job runner.Job) error {
	task, err := r.Tasks.Get(ctx, r.DB, job.TaskID)
	if err != nil {
		return fmt.Errorf("task %s: %w", job.TaskID, err)
	}
	r.dropStandby(task.GroupFolder) // one agent per group
	g, err := r.Groups.ByFolder(ctx, task.GroupFolder)
	if err != nil {
		return r.Tasks.Done(ctx, task.ID, "", fmt.Errorf("group %s: %w", task.GroupFolder, err))
	}
	run := &agentRun{router: r, group: g, replyTo: task.ChatJID, useSession: task.ContextMode != scheduler.ContextIsolated}
	runErr := run.start(ctx, job, ScheduledPrompt(task.Prompt), true)
	if err := r.Tasks.Done(ctx, task.ID, run.lastText, runErr); err != nil {
		r.Log.Error().Err(err).Str("task", task.ID).Msg("record task run")
	}
	return nil // a task is not retried: its schedule brings the next run
}

// GiveUp is the queue's OnGiveUp: a run failed every retry. The group is
// told, and the messages that run was given count as answered, so the next
// message does not replay them; later ones still get their run.
func (r *Router) GiveUp(job runner.Job, runErr error) {
	ctx := context.Background()
	r.Log.Error().Err(runErr).Str("group", job.Folder).Str("task", job.TaskID).Msg("agent run failed; giving up")
	if job.TaskID != "" {
		return
	}
	g, err := r.Groups.ByFolder(ctx, job.Folder)
	if err != nil {
		return
	}
	cfg := r.Config()
	text := fmt.Sprintf("%s could not answer: the assistant failed several times (%s). Please try again later.", cfg.AssistantName, firstLine(runErr.Error(), 200))
	r.lock()
	top := r.attempted[g.Folder]
	r.mu.Unlock()
	if err := r.enqueue(ctx, g.JID, text, alerts.KindNotice, g.JID, top); err != nil {
		r.Log.Error().Err(err).Str("group", g.Folder).Msg("tell the group its run failed")
	}
}

// enqueue queues text (if any) for chat and marks the messages of
// cursorChat up to seq (if any) answered, in one transaction: an answer and
// the position it answers move together.
func (r *Router) enqueue(ctx context.Context, chat, text, kind, cursorChat string, seq int64) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if text != "" {
		if _, err := alerts.EnqueueTx(ctx, tx, chat, text, kind); err != nil {
			return err
		}
	}
	if seq > 0 {
		if err := setCursor(ctx, tx, cursorChat, seq); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if text != "" {
		r.Outbox.Wake()
	}
	return nil
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func setCursor(ctx context.Context, tx *sql.Tx, jid string, seq int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO cursors (chat_jid, answered_seq) VALUES (?, ?)
		ON CONFLICT (chat_jid) DO UPDATE SET answered_seq = max(answered_seq, excluded.answered_seq)`, jid, seq)
	return err
}

func (r *Router) session(ctx context.Context, folder string) string {
	var id string
	_ = r.DB.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, folder).Scan(&id)
	return id
}

// ClearSession makes the group's next run start a fresh agent session.
func (r *Router) ClearSession(ctx context.Context, folder string) error {
	_, err := ResetSession(ctx, r.DB, folder)
	return err
}

// ResetSession makes the group's next run start a fresh agent session and
// reports whether it had one. The row stays, empty, with the time of the
// reset: a run that started before it must not save its old session back
// when it ends (saveSession), nor take more follow-ups (resetSince).
func ResetSession(ctx context.Context, db *sql.DB, folder string) (bool, error) {
	var had string
	_ = db.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, folder).Scan(&had)
	_, err := db.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, '', ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = '', updated_at = excluded.updated_at`, folder, time.Now().UnixMilli())
	return had != "", err
}

// resetSince reports whether the group's session was reset after since.
func (r *Router) resetSince(ctx context.Context, folder string, since time.Time) bool {
	var n int
	_ = r.DB.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE folder = ? AND session_id = '' AND updated_at > ?`,
		folder, since.UnixMilli()).Scan(&n)
	return n > 0
}

// sessionGone tells whether an agent's error says its saved session no
// longer exists.
func sessionGone(failure string) bool {
	return strings.Contains(strings.ToLower(failure), "no conversation found")
}

// saveSession records id as the group's session, unless the session was
// reset after since (when the run that produced id started).
func (r *Router) saveSession(ctx context.Context, folder, id string, since time.Time) {
	res, err := r.DB.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at
		WHERE sessions.session_id != '' OR sessions.updated_at <= ?`,
		folder, id, time.Now().UnixMilli(), since.UnixMilli())
	if err != nil {
		r.Log.Error().Err(err).Str("group", folder).Msg("save session id")
		return
	}
	if n, _ := res.RowsAffected(); n == 0 {
		r.Log.Info().Str("group", folder).Msg("the session was reset during the run; the next run starts fresh")
	}
}

// agentRun is one agent process for a group: its handler state.
type agentRun struct {
	router     *Router
	group      groups.Group
	replyTo    string
	useSession bool
	fresh      bool      // the saved session was gone: this run starts a new one
	since      time.Time // when the run read its session
	// A standby (warm.go) starts without a prompt and waits for its first
	// one; adopted holds that prompt once it was handed over.
	standby     bool
	adopted     string
	fingerprint string

	mu         sync.Mutex
	batches    []int64 // for each prompt batch sent (initial, then follow-ups), its highest seq
	answered   int     // result frames seen
	delivered  int64   // highest seq handed to the agent
	sent       int     // replies queued
	violations int
	lastText   string
	failure    string // the last error frame
	ipcDir     string
	started    chan struct{}      // closed once the agent process runs (message runs)
	conf       *confinement       // the OS sandbox of a non-main run
	eff        security.Effective // the run's policy
	mark       int                // the agent's process group, recorded in agent_marks
}

func (a *agentRun) start(ctx context.Context, job runner.Job, prompt string, isTask bool) error {
	r, g := a.router, a.group
	cfg := r.Config()
	list, err := r.Groups.List(ctx)
	if err != nil {
		return err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	a.eff = eff
	if a.standby && a.adopted == "" {
		if a.fingerprint, err = r.fingerprint(ctx, g, a.useSession); err != nil {
			return err
		}
	}
	sdk, err := json.Marshal(eff.SDKOptions)
	if err != nil {
		return err
	}
	var sec json.RawMessage
	if !g.IsMain {
		pol := eff
		pol.SDKOptions = nil
		if sec, err = json.Marshal(pol); err != nil {
			return err
		}
	}
	groupDir := filepath.Join(cfg.GroupsDir, g.Folder)
	a.ipcDir = filepath.Join(cfg.DataDir, "ipc", g.Folder)
	sessionDir := filepath.Join(cfg.DataDir, "sessions", g.Folder)
	for _, d := range []string{filepath.Join(a.ipcDir, "input"), sessionDir, filepath.Join(groupDir, "logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	if r.BeforeRun != nil {
		r.BeforeRun(ctx, g)
	}
	token, err := r.Tokens.Issue(ctx, g.Folder)
	if err != nil {
		return fmt.Errorf("issue IPC token: %w", err)
	}
	defer func() {
		if err := r.Tokens.Finish(context.WithoutCancel(ctx), token); err != nil {
			r.Log.Error().Err(err).Msg("finish IPC token")
		}
	}()
	env := map[string]string{
		"NANOCLAW_GROUP_FOLDER": g.Folder,
		"NANOCLAW_CHAT_JID":     g.JID,
		"NANOCLAW_IS_MAIN":      boolStr(g.IsMain),
		"NANOCLAW_GROUP_DIR":    groupDir,
		"NANOCLAW_IPC_DIR":      a.ipcDir,
		"NANOCLAW_IPC_TOKEN":    token,
		"NANOCLAW_BIN":          r.Binary,
		"NANOCLAW_SESSION_DIR":  sessionDir,
	}
	for _, name := range cfg.Agent.Env {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	if cfg.Timezone != "" {
		env["TZ"] = cfg.Timezone // the agent's clock reads as the group's
	}
	if !g.IsMain {
		env["NANOCLAW_GLOBAL_MEMORY"] = filepath.Join(cfg.GroupsDir, security.GlobalFolder, "CLAUDE.md")
	}
	in := runner.ContainerInput{
		Prompt: prompt, GroupFolder: g.Folder, ChatJID: g.JID, IsMain: g.IsMain, IsScheduledTask: isTask,
		AssistantName: cfg.AssistantName, Security: sec, SDKOptions: sdk, Standby: a.standby && a.adopted == "",
	}
	a.since = time.Now()
	if a.useSession && !a.fresh {
		in.SessionID = r.session(ctx, g.Folder)
	}
	if r.Typing != nil && !a.standby {
		r.Typing(ctx, a.replyTo, true)
		defer r.Typing(context.WithoutCancel(ctx), a.replyTo, false)
	}
	spec := runner.Spec{
		Command: cfg.Agent.Command, Dir: groupDir, Env: env, Input: in, IPCDir: a.ipcDir,
		LogDir: filepath.Join(groupDir, "logs"), Timeout: cfg.Agent.Timeout.D(), IdleTimeout: cfg.Agent.IdleTimeout.D(),
		Closing: job.Closing,
	}
	if !g.IsMain {
		if a.conf, err = r.confine(ctx, cfg, g, eff, &spec, sessionDir); err != nil {
			return err
		}
		defer a.conf.done()
	}
	out, err := runner.Run(ctx, spec, a)
	if a.conf != nil && a.conf.exceeded() != "" {
		err = runner.NoRetry(fmt.Errorf("the run was stopped: %s", a.conf.exceeded()))
	}
	if a.mark != 0 {
		r.DB.Exec(`DELETE FROM agent_marks WHERE pgid = ?`, a.mark)
	}
	if out.NewSessionID != "" && a.useSession {
		r.saveSession(context.WithoutCancel(ctx), g.Folder, out.NewSessionID, a.since)
	}
	var exitErr *runner.ExitError
	if in.SessionID != "" && !a.fresh && a.answered == 0 && sessionGone(a.failure) && (err == nil || errors.As(err, &exitErr)) {
		// The CLI prunes old transcripts: resuming a session it no longer
		// has fails every time. Start a fresh one, once, for the same messages.
		r.Log.Warn().Str("group", g.Folder).Str("session", in.SessionID).Msg("the agent's saved session is gone; starting a fresh one")
		r.ClearSession(context.WithoutCancel(ctx), g.Folder)
		a.fresh, a.failure, a.started = true, "", nil
		if a.standby { // the prompt went to the standby as its first input
			prompt, a.standby = a.adopted, false
		}
		return a.start(ctx, job, prompt, isTask)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !g.IsMain && a.violations > 0 && a.sent == 0 {
		a.queue(context.WithoutCancel(ctx), alerts.GroupNotice(cfg.AssistantName), alerts.KindNotice, 0)
	}
	if err != nil {
		return err
	}
	if a.failure != "" && a.answered == 0 {
		return fmt.Errorf("agent reported an error: %s", a.failure)
	}
	return nil
}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// follow hands messages that arrive during the run to the agent. It
// starts only once the agent runs: the runner empties input/ before the
// start, which would delete an earlier follow-up.
func (a *agentRun) follow(ctx context.Context, more <-chan struct{}, stop <-chan struct{}) {
	select {
	case <-a.started:
	case <-stop:
		return
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-more:
		}
		a.mu.Lock()
		from := a.delivered
		a.mu.Unlock()
		msgs, err := a.router.after(ctx, a.group.JID, from)
		if err != nil || len(msgs) == 0 {
			continue
		}
		if !anyCalls(a.group, msgs) {
			continue // chatter stays context until a message calls the assistant
		}
		if a.useSession && a.router.resetSince(ctx, a.group.Folder, a.since) {
			continue // after a /new they belong to the fresh session of the next run
		}
		prompt, top := a.router.promptOf(msgs)
		if err := runner.FollowUp(a.ipcDir, prompt); err != nil {
			a.router.Log.Error().Err(err).Str("group", a.group.Folder).Msg("follow-up; it will come with the next run")
			continue
		}
		a.mu.Lock()
		a.batches = append(a.batches, top)
		a.delivered = top
		a.mu.Unlock()
	}
}

// OnStart implements runner.Handler.
func (a *agentRun) OnStart(pid int) {
	if a.started != nil {
		close(a.started)
	}
	if a.conf != nil {
		a.conf.started(pid)
	}
	if m, ok := runner.MarkOf(pid); ok {
		a.mark = m.PGID
		if _, err := a.router.DB.Exec(`INSERT OR REPLACE INTO agent_marks (pgid, folder, start, boot_id) VALUES (?, ?, ?, ?)`,
			m.PGID, a.group.Folder, m.Start, m.BootID); err != nil {
			a.router.Log.Warn().Err(err).Msg("record agent process group")
		}
	}
	if f := a.router.OnRunStart; f != nil {
		f(a.group.Folder, pid)
	}
}

// OnResult implements runner.Handler: a result answers the oldest
// unanswered prompt batch; its text and the cursor move together.
func (a *agentRun) OnResult(res runner.Result) {
	ctx := context.Background()
	a.mu.Lock()
	defer a.mu.Unlock()
	if res.Status != "success" {
		a.failure = res.Error
		if a.failure == "" {
			a.failure = "unknown error"
		}
		a.router.Log.Warn().Str("group", a.group.Folder).Str("error", a.failure).Msg("agent result error")
		return
	}
	var upTo int64
	if a.answered < len(a.batches) {
		upTo = a.batches[a.answered]
	}
	a.answered++
	text := ""
	if res.Result != nil {
		text = StripInternal(*res.Result)
	}
	if text != "" {
		a.lastText = text
	}
	a.queue(ctx, text, alerts.KindReply, upTo)
}

// busyRetry is how long an answer waits for a locked database.
const busyRetry = 2 * time.Minute

// queue puts text (if any) in the outbox and moves the cursor to upTo (if
// any) in one transaction. While another process holds the database locked, it keeps trying for
// up to busyRetry: the answer exists only here, and if it were dropped the
// next follow-up's answer would move the cursor past the messages it
// answered, which then no reply would carry.
func (a *agentRun) queue(ctx context.Context, text, kind string, upTo int64) {
	err := a.router.enqueue(ctx, a.replyTo, text, kind, a.group.JID, upTo)
	for wait, until := 100*time.Millisecond, time.Now().Add(busyRetry); store.Busy(err) && time.Now().Before(until); wait = min(2*wait, 2*time.Second) {
		a.router.Log.Warn().Err(err).Str("group", a.group.Folder).Msg("the database is locked; trying again to queue the answer")
		time.Sleep(wait)
		err = a.router.enqueue(ctx, a.replyTo, text, kind, a.group.JID, upTo)
	}
	if err != nil {
		a.router.Log.Error().Err(err).Str("group", a.group.Folder).Msg("queue the answer; the messages stay unanswered")
		return
	}
	if text != "" {
		a.sent++
	}
}

// OnViolation implements runner.Handler.
func (a *agentRun) OnViolation(v alerts.Violation) {
	a.mu.Lock()
	a.violations++
	a.mu.Unlock()
	v.Group = a.group.Folder
	v.Rule = security.RuleFor(a.eff, v.Kind, v.Tool)
	if err := a.router.Reporter.Report(context.Background(), v); err != nil {
		a.router.Log.Error().Err(err).Str("group", v.Group).Msg("report violation")
	}
}
