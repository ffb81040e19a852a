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
	"github.com/nanoclawd/nanoclawd/internal/sessions"
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
	res, err := r.DB.ExecContext(ctx, `INSERT OR IGNORE INTO messages (chat_jid, id, sender, sender_name, text, time, from_me, is_bot)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, m.ChatJID, m.ID, m.Sender, m.SenderName, m.Text, m.Time.UnixMilli(), m.FromMe, m.IsBot)
	if err != nil {
		return fmt.Errorf("store message: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 || m.IsBot {
		return nil // a redelivery, or our own reply echoed back
	}
	if w := r.Config().Agent.NewSessionWord; w != "" && strings.TrimSpace(m.Text) == w && (g.IsMain || m.FromMe || g.Security.AllowsSender(m.Sender)) {
		seq, err := res.LastInsertId()
		if err != nil {
			return err
		}
		return r.newSession(ctx, g, seq)
	}
	r.lock()
	running := r.active[g.Folder]
	r.mu.Unlock()
	if running || calls(g, []stored{{senderID: m.Sender, fromMe: m.FromMe, PromptMessage: PromptMessage{Text: m.Text}}}) {
		r.Queue.EnqueueMessages(g.Folder)
	}
	return nil
}

// newSession handles the new-session word at seq: the group's next run
// starts a fresh session, a running agent is asked to finish, and the chat
// is told; the word and everything before it count as answered.
func (r *Router) newSession(ctx context.Context, g groups.Group, seq int64) error {
	cfg := r.Config()
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := sessions.Reset(ctx, tx, g.Folder); err != nil {
		return fmt.Errorf("reset the session of %s: %w", g.Folder, err)
	}
	const text = "Starting a fresh conversation: earlier messages are forgotten; what is in my notes (CLAUDE.md) stays."
	if _, err := alerts.EnqueueTx(ctx, tx, g.JID, text, alerts.KindNotice); err != nil {
		return err
	}
	if err := setCursor(ctx, tx, g.JID, seq); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	r.Outbox.Wake()
	r.lock()
	running := r.active[g.Folder]
	r.mu.Unlock()
	if running {
		if err := runner.Close(filepath.Join(cfg.DataDir, "ipc", g.Folder)); err != nil {
			r.Log.Warn().Err(err).Str("group", g.Folder).Msg("ask the running agent to finish")
		}
	}
	r.Log.Info().Str("group", g.Folder).Msg("session reset by the chat; the next run starts fresh")
	return nil
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
		if calls(g, msgs) {
			out = append(out, g.Folder)
		}
	}
	return out, nil
}

type stored struct {
	seq      int64
	senderID string
	fromMe   bool
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
	rows, err := r.DB.QueryContext(ctx, `SELECT seq, sender, from_me, CASE WHEN sender_name != '' THEN sender_name ELSE sender END, time, text
		FROM messages WHERE chat_jid = ? AND seq > ? AND is_bot = 0 ORDER BY time, seq`, jid, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []stored
	for rows.Next() {
		var s stored
		var ms int64
		if err := rows.Scan(&s.seq, &s.senderID, &s.fromMe, &s.Sender, &ms, &s.Text); err != nil {
			return nil, err
		}
		s.Time = time.UnixMilli(ms)
		out = append(out, s)
	}
	return out, rows.Err()
}

// calls reports whether msgs call for the group's agent: any message in
// the main group; otherwise a message from a sender the group allows
// (security.Policy.Senders) that holds the trigger, or any such message
// when the group needs no trigger. The rest come along as context.
func calls(g groups.Group, msgs []stored) bool {
	for _, m := range msgs {
		if g.IsMain {
			return true
		}
		if (!g.RequiresTrigger || Triggers(m.Text, g.Trigger)) && (m.fromMe || g.Security.AllowsSender(m.senderID)) {
			return true
		}
	}
	return false
}

// promptOf is the prompt for msgs (at most agent.maxPromptMessages of
// them, the newest) and the highest seq it answers (older ones left out
// count as answered too).
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
	loc := cfg.Location()
	return FormatPrompt(pm, loc, ZoneName(loc)), top
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
	if !calls(g, msgs) {
		return nil // context only; it comes along with the next trigger
	}
	r.setActive(g.Folder, true)
	defer r.setActive(g.Folder, false)

	prompt, top := r.promptOf(msgs)
	r.lock()
	r.attempted[g.Folder] = top
	r.mu.Unlock()
	run := &agentRun{router: r, group: g, replyTo: g.JID, batches: []int64{top}, delivered: top, useSession: true,
		started: make(chan struct{})}
	stopFollow := make(chan struct{})
	followDone := make(chan struct{})
	go func() {
		defer close(followDone)
		run.follow(ctx, job.More, stopFollow)
	}()
	err = run.start(ctx, job, prompt, false)
	close(stopFollow)
	<-followDone
	if errors.Is(err, runner.ErrTimeout) {
		if run.answeredSome() {
			// The agent answered and then went quiet or stalled on a later
			// follow-up: not a failure. What it left unanswered gets a new
			// run, since a message that came during a run always causes one.
			r.Log.Info().Str("group", g.Folder).Msg("agent timed out after answering; ended it")
			return nil
		}
		// The same prompt would hang again and cost another timeout.
		return runner.NoRetry(err)
	}
	return err
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
	g, err := r.Groups.ByFolder(ctx, task.GroupFolder)
	if err != nil {
		return r.Tasks.Done(ctx, task.ID, "", fmt.Errorf("group %s: %w", task.GroupFolder, err))
	}
	run := &agentRun{router: r, group: g, replyTo: task.ChatJID, useSession: task.ContextMode != scheduler.ContextIsolated}
	runErr := run.start(ctx, job, ScheduledMark+"\n\n"+task.Prompt, true)
	if errors.Is(runErr, runner.ErrTimeout) && run.answeredSome() {
		runErr = nil // it answered, then idled past its limit
	}
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

// sessionGone reports whether a run failed because the session it was to
// resume no longer exists (the CLI prunes old transcripts): the Claude CLI
// says "No conversation found with session ID: …".
func sessionGone(err error, failure string) bool {
	const gone = "no conversation found"
	if strings.Contains(strings.ToLower(failure), gone) {
		return true
	}
	var ee *runner.ExitError
	return errors.As(err, &ee) && strings.Contains(strings.ToLower(ee.StderrTail), gone)
}

// agentRun is one agent process for a group: its handler state.
type agentRun struct {
	router     *Router
	group      groups.Group
	replyTo    string
	useSession bool

	mu         sync.Mutex
	batches    []int64 // for each prompt batch sent (initial, then follow-ups), its highest seq
	answered   int     // result frames seen
	delivered  int64   // highest seq handed to the agent
	sent       int     // replies queued
	violations int
	lastText   string
	failure    string // the last error frame
	ipcDir     string
	started    chan struct{} // closed once the agent process runs (message runs)
	startOnce  sync.Once
	mark       int // the agent's process group, recorded in agent_marks
}

func (a *agentRun) start(ctx context.Context, job runner.Job, prompt string, isTask bool) error {
	r, g := a.router, a.group
	cfg := r.Config()
	list, err := r.Groups.List(ctx)
	if err != nil {
		return err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
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
	if !g.IsMain {
		// Read by the agent runner into the system prompt.
		env["NANOCLAW_GLOBAL_MEMORY"] = filepath.Join(cfg.GroupsDir, groups.GlobalFolder, groups.MemoryFile)
	}
	if tz := ZoneName(cfg.Location()); tz != "" {
		env["TZ"] = tz // the agent's clock reads as the chat's
	}
	for _, name := range cfg.Agent.Env {
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	in := runner.ContainerInput{
		Prompt: prompt, GroupFolder: g.Folder, ChatJID: g.JID, IsMain: g.IsMain, IsScheduledTask: isTask,
		AssistantName: cfg.AssistantName, Security: sec, SDKOptions: sdk,
	}
	since := time.Now()
	if a.useSession {
		if in.SessionID, err = sessions.Get(ctx, r.DB, g.Folder); err != nil {
			return fmt.Errorf("read the session of %s: %w", g.Folder, err)
		}
	}
	if r.Typing != nil {
		r.Typing(ctx, a.replyTo, true)
		defer r.Typing(context.WithoutCancel(ctx), a.replyTo, false)
	}
	var out runner.Outcome
	for {
		out, err = runner.Run(ctx, runner.Spec{
			Command: cfg.Agent.Command, Dir: groupDir, Env: env, Input: in, IPCDir: a.ipcDir,
			LogDir: filepath.Join(groupDir, "logs"), Timeout: cfg.Agent.Timeout.D(), IdleTimeout: cfg.Agent.IdleTimeout.D(),
			Closing: job.Closing,
		}, a)
		if a.mark != 0 {
			r.DB.Exec(`DELETE FROM agent_marks WHERE pgid = ?`, a.mark)
		}
		if in.SessionID == "" || a.answeredSome() || !sessionGone(err, a.failureText()) {
			break
		}
		// Once: the next run has no session to lose.
		r.Log.Warn().Str("group", g.Folder).Str("session", in.SessionID).
			Msg("the saved agent session is gone; starting a fresh session with the same messages")
		if since, err = sessions.Reset(context.WithoutCancel(ctx), r.DB, g.Folder); err != nil {
			return fmt.Errorf("reset the lost session of %s: %w", g.Folder, err)
		}
		in.SessionID = ""
		a.mu.Lock()
		a.failure = ""
		a.mu.Unlock()
	}
	if out.NewSessionID != "" && a.useSession {
		if ok, err := sessions.Save(context.WithoutCancel(ctx), r.DB, g.Folder, out.NewSessionID, since); err != nil {
			r.Log.Error().Err(err).Str("group", g.Folder).Msg("save session id")
		} else if !ok {
			r.Log.Info().Str("group", g.Folder).Msg("session reset during the run; the next run starts fresh")
		}
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

func (a *agentRun) failureText() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failure
}

// answeredSome reports whether the agent gave at least one successful
// result.
func (a *agentRun) answeredSome() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.answered > 0
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
		if err != nil || !calls(a.group, msgs) {
			continue // chatter without the trigger waits as context for the next one
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
		a.startOnce.Do(func() { close(a.started) })
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

// queue puts text (if any) in the outbox and moves the cursor to upTo (if
// any) in one transaction.
func (a *agentRun) queue(ctx context.Context, text, kind string, upTo int64) {
	if err := a.router.enqueue(ctx, a.replyTo, text, kind, a.group.JID, upTo); err != nil {
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
	v.Action = "blocked"
	if err := a.router.Reporter.Report(context.Background(), v); err != nil {
		a.router.Log.Error().Err(err).Str("group", v.Group).Msg("report violation")
	}
}
