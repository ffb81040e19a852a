package approvals

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// What the commands drive, declared as they use them.
type (
	// Groups reads the registry (writes go through its Tx functions).
	Groups interface {
		List(ctx context.Context) ([]groups.Group, error)
	}
	// Queue starts a resumed group's run and tells which agents are at work.
	Queue interface {
		EnqueueMessages(folder string)
		Running(folder string) bool
	}
	// Audit records each change in the audit trail (the violations table
	// and the group's logs/security.jsonl), in the change's transaction.
	Audit interface {
		RecordTx(ctx context.Context, tx *store.Tx, v security.Violation, alert bool) error
		Flush(ctx context.Context) error
	}
	// Spend is what each group spent today and this month, and whether
	// its budget is spent.
	Spend interface {
		Spending(ctx context.Context, gs []groups.Group) (map[string]usage.GroupSpend, error)
	}
	// Closer asks a group's running agent to finish its turn and stop.
	Closer func(folder string) error
)

// The actions written to the audit trail for the owner's changes.
const (
	ActionAllowed = "allowed-by-owner"
	ActionUndone  = "undone-by-owner"
	ActionPaused  = "paused-by-owner"
	ActionResumed = "resumed-by-owner"
)

// Commands carries out the owner's commands from the main chat.
type Commands struct {
	DB     *store.DB
	Groups Groups
	Config func() *config.Config
	Queue  Queue
	Audit  Audit
	Outbox *outbox.Outbox
	Close  Closer // may be nil
	Spend  Spend  // nil until usage is counted
	Now    func() time.Time
	Log    zerolog.Logger
}

// verbs are the commands the daemon takes; anything else starting with
// "/" goes to the main group's agent as before.
var verbs = map[string]bool{"/allow": true, "/undo": true, "/pause": true, "/resume": true, "/groups": true, "/model": true}

// IsCommand tells whether text is one of the owner's commands.
func IsCommand(text string) bool {
	f := strings.Fields(text)
	return len(f) > 0 && verbs[strings.ToLower(f[0])]
}

// Handle takes m, a message of group g, if it is an owner's command in the
// main chat: it carries it out (or refuses it, for a sender who is not an
// approver), answers in the chat and reports true. The command, its effect
// and the answer commit together, keyed by the message, so a message the
// channel delivers again changes nothing twice and is answered once.
func (c *Commands) Handle(ctx context.Context, g groups.Group, m channel.Message) (bool, error) {
	if !g.IsMain || m.IsBot || !IsCommand(m.Text) {
		return false, nil
	}
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		return true, fmt.Errorf("approvals: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO owner_commands (chat_jid, msg_id, at) VALUES (?, ?, ?)`,
		m.ChatJID, m.ID, c.now().UnixMilli())
	if err != nil {
		return true, fmt.Errorf("approvals: record command: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return true, nil // handled before this delivery
	}
	var (
		reply string
		after func()
	)
	args := strings.Fields(m.Text)
	verb := strings.ToLower(args[0])
	who := whoIs(m)
	if !c.approver(g, m) {
		reply = fmt.Sprintf("%s is only for the owner (alerts.approvers in the config): nothing changed.", verb)
		c.Log.Warn().Str("sender", m.SenderJID).Str("command", verb).Msg("an owner's command from someone else was refused")
	} else {
		reply, after, err = c.do(ctx, tx, verb, args[1:], who)
		if err != nil {
			return true, err
		}
	}
	if _, err := c.Outbox.EnqueueTx(ctx, tx, g.JID, reply, outbox.KindNotice); err != nil {
		return true, err
	}
	if err := tx.Commit(); err != nil {
		return true, fmt.Errorf("approvals: commit %s: %w", verb, err)
	}
	if err := c.Audit.Flush(ctx); err != nil {
		c.Log.Warn().Err(err).Msg("approvals: audit lines of an owner's change")
	}
	if after != nil {
		after()
	}
	return true, nil
}

// approver tells whether m's sender may use the commands: anyone in a
// local: main chat (it is the owner's own socket); else a number in
// alerts.approvers, or, when that is unset, the paired account itself.
func (c *Commands) approver(g groups.Group, m channel.Message) bool {
	if strings.HasPrefix(g.JID, "local:") {
		return true
	}
	if list := c.Config().Alerts.Approvers; len(list) > 0 {
		return security.SenderAllowed(list, m.SenderJID)
	}
	return m.FromMe
}

func whoIs(m channel.Message) string {
	if m.SenderJID != "" {
		return m.SenderJID
	}
	return m.SenderName
}

func (c *Commands) do(ctx context.Context, tx *store.Tx, verb string, args []string, who string) (string, func(), error) {
	switch verb {
	case "/allow":
		if len(args) == 0 || len(args) > 2 {
			return "Write /allow CODE, with the code from the alert: nothing changed.", nil, nil
		}
		folder := ""
		if len(args) == 2 {
			folder = args[1]
		}
		return c.allow(ctx, tx, strings.ToUpper(args[0]), folder, who)
	case "/undo":
		return c.undo(ctx, tx, who)
	case "/pause", "/resume":
		if len(args) != 1 {
			return fmt.Sprintf("Write %s FOLDER (/groups lists them): nothing changed.", verb), nil, nil
		}
		return c.pause(ctx, tx, args[0], verb == "/pause", who)
	case "/model":
		return c.model(ctx, tx, args, who)
	}
	text, err := c.list(ctx)
	return text, nil, err
}

// allow adds the rule of code to its group's override.
func (c *Commands) allow(ctx context.Context, tx *store.Tx, code, folder, who string) (string, func(), error) {
	var grp, key, value string
	var created int64
	var used sql.NullInt64
	err := tx.QueryRowContext(ctx, `SELECT grp, key, value, created_at, used_at FROM allow_codes WHERE code = ?`, code).
		Scan(&grp, &key, &value, &created, &used)
	now := c.now()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Sprintf("There is no code %s: nothing changed. Codes come with [SANDBOX ALERT] messages and work once, for 24 hours.", code), nil, nil
	case err != nil:
		return "", nil, fmt.Errorf("approvals: read code: %w", err)
	case used.Valid:
		return fmt.Sprintf("Code %s was already used (%s): nothing changed.", code, c.clock(time.UnixMilli(used.Int64))), nil, nil
	case now.Sub(time.UnixMilli(created)) > CodeTTL:
		return fmt.Sprintf("Code %s has expired (codes work for 24 hours): nothing changed. `nanoclawd groups set-security %s` still can.", code, grp), nil, nil
	case folder != "" && folder != grp:
		return fmt.Sprintf("Code %s is for group %s, not %s: nothing changed.", code, grp, folder), nil, nil
	}
	g, err := groups.ByFolderTx(ctx, tx, grp)
	if errors.Is(err, groups.ErrNotFound) {
		return fmt.Sprintf("Group %s is no longer registered: nothing changed.", grp), nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	next, added := add(g.Security, c.Config().HostSecurity, key, value)
	if _, err := tx.ExecContext(ctx, `UPDATE allow_codes SET used_at = ? WHERE code = ?`, now.UnixMilli(), code); err != nil {
		return "", nil, fmt.Errorf("approvals: use code: %w", err)
	}
	if !added {
		return fmt.Sprintf("%s already has %s in %s: nothing changed.", grp, value, key), nil, nil
	}
	if probs := config.ValidatePolicy(next, ""); len(probs) > 0 {
		return fmt.Sprintf("The change would not be a valid override (%s): nothing changed.", probs[0].Msg), nil, nil
	}
	before, after := encode(g.Security), encode(next)
	if err := groups.SetSecurityTx(ctx, tx, grp, next); err != nil {
		return "", nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO owner_changes (grp, code, who, key, value, before, after, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		grp, code, who, key, value, before, after, now.UnixMilli()); err != nil {
		return "", nil, fmt.Errorf("approvals: record change: %w", err)
	}
	detail := fmt.Sprintf("%s added %s to %s of group %s with code %s", who, value, key, grp, code)
	if err := c.audit(ctx, tx, grp, key, value, detail, ActionAllowed); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("Allowed for %s: %s + %s (now: %s). It applies from the group's next run; /undo takes it back.",
		grp, key, value, listOf(next, key)), c.changed, nil
}

// undo takes back the newest /allow still in force: the override goes back
// to what it was, or, if it was changed since, only loses that rule.
func (c *Commands) undo(ctx context.Context, tx *store.Tx, who string) (string, func(), error) {
	var id int64
	var grp, code, key, value, after string
	var before sql.NullString
	err := tx.QueryRowContext(ctx, `SELECT id, grp, code, key, value, before, after FROM owner_changes
		WHERE undone_at IS NULL ORDER BY id DESC LIMIT 1`).Scan(&id, &grp, &code, &key, &value, &before, &after)
	if errors.Is(err, sql.ErrNoRows) {
		return "Nothing to undo: no change made with /allow is in force.", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("approvals: read last change: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE owner_changes SET undone_at = ? WHERE id = ?`, c.now().UnixMilli(), id); err != nil {
		return "", nil, fmt.Errorf("approvals: undo change: %w", err)
	}
	g, err := groups.ByFolderTx(ctx, tx, grp)
	if errors.Is(err, groups.ErrNotFound) {
		return fmt.Sprintf("Group %s is no longer registered: nothing to undo there.", grp), nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	next := remove(g.Security, key, value)
	if encode(g.Security).String == after {
		next = decode(before)
	}
	if err := groups.SetSecurityTx(ctx, tx, grp, next); err != nil {
		return "", nil, err
	}
	detail := fmt.Sprintf("%s took back %s from %s of group %s (allowed with code %s)", who, value, key, grp, code)
	if err := c.audit(ctx, tx, grp, key, value, detail, ActionUndone); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("Undone for %s: %s − %s (now: %s).", grp, key, value, listOf(next, key)), c.changed, nil
}

// pause stops (or resumes) starting agents for folder; its messages are
// kept either way, and a resume answers what waited.
func (c *Commands) pause(ctx context.Context, tx *store.Tx, folder string, pause bool, who string) (string, func(), error) {
	g, err := groups.ByFolderTx(ctx, tx, folder)
	if errors.Is(err, groups.ErrNotFound) {
		return fmt.Sprintf("There is no group %s: nothing changed. /groups lists them.", folder), nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	if g.Paused == pause {
		if pause {
			return fmt.Sprintf("%s is already paused; /resume %s starts it again.", folder, folder), nil, nil
		}
		return fmt.Sprintf("%s is not paused.", folder), nil, nil
	}
	if err := groups.SetPausedTx(ctx, tx, folder, pause); err != nil {
		return "", nil, err
	}
	action, what := ActionResumed, "resumed"
	if pause {
		action, what = ActionPaused, "paused"
	}
	if err := c.audit(ctx, tx, folder, "paused", fmt.Sprint(pause), fmt.Sprintf("%s %s group %s", who, what, folder), action); err != nil {
		return "", nil, err
	}
	if !pause {
		return fmt.Sprintf("Resumed %s: its agent answers what waited.", folder),
			func() { c.Queue.EnqueueMessages(folder) }, nil
	}
	text := fmt.Sprintf("Paused %s: no agent starts for it until /resume %s; its messages are kept.", folder, folder)
	if c.Queue.Running(folder) {
		text += " The agent at work there finishes its current answer."
	}
	return text, func() {
		if c.Close != nil {
			if err := c.Close(folder); err != nil {
				c.Log.Warn().Err(err).Str("group", folder).Msg("ask the running agent of a paused group to finish")
			}
		}
	}, nil
}

// list is /groups: each group, its state and today's spend.
func (c *Commands) list(ctx context.Context) (string, error) {
	all, err := c.Groups.List(ctx)
	if err != nil {
		return "", err
	}
	var spending map[string]usage.GroupSpend
	if c.Spend != nil {
		if spending, err = c.Spend.Spending(ctx, all); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	b.WriteString("Groups:")
	for _, g := range all {
		var state []string
		if g.IsMain {
			state = append(state, "main")
		}
		switch {
		case g.Paused:
			state = append(state, "paused")
		case c.Queue.Running(g.Folder):
			state = append(state, "running")
		default:
			state = append(state, "idle")
		}
		spend := "spend not counted"
		if sp, ok := spending[g.Folder]; ok {
			spend = "today " + sp.Today.Cost()
			if sp.Over {
				state = append(state, "over budget")
			}
		}
		fmt.Fprintf(&b, "\n- %s (%s): %s · %s", g.Folder, g.Name, strings.Join(state, ", "), spend)
	}
	if len(all) == 0 {
		b.WriteString(" none registered.")
	}
	return b.String(), nil
}

// audit writes one change to the audit trail (no alert: the owner made it).
func (c *Commands) audit(ctx context.Context, tx *store.Tx, grp, key, value, detail, action string) error {
	kind := security.KindFilesystem
	switch key {
	case KeyDomains:
		kind = security.KindNetwork
	case "paused":
		kind = "group"
	}
	return c.Audit.RecordTx(ctx, tx, security.Violation{Time: c.now(), Group: grp, Kind: kind, Tool: "owner",
		Target: value, Detail: detail, Action: action, Rule: key}, false)
}

// changed tells the running daemon that the registry changed, as the CLI
// does, so standbys made with the old policy are replaced.
func (c *Commands) changed() {
	if err := groups.NotifyChanged(c.Config().DataDir); err != nil {
		c.Log.Warn().Err(err).Msg("approvals: tell the daemon the groups changed")
	}
}

func (c *Commands) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Commands) clock(t time.Time) string {
	return t.In(c.Config().Location()).Format("Jan 2 15:04")
}

func encode(p *security.Policy) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	b, _ := json.Marshal(p)
	return sql.NullString{String: string(b), Valid: true}
}

func decode(s sql.NullString) *security.Policy {
	if !s.Valid {
		return nil
	}
	p := new(security.Policy)
	if json.Unmarshal([]byte(s.String), p) != nil {
		return nil
	}
	return p
}

// listOf shows the list key names in p, for the owner's answer.
func listOf(p *security.Policy, key string) string {
	if p == nil {
		return "the global list"
	}
	list := *clonePolicy(p).field(key, security.Policy{})
	if len(list) == 0 {
		return "nothing"
	}
	return strings.Join(list, ", ")
}
