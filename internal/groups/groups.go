// Package groups is the registry of WhatsApp (and local) chats the
// assistant serves, kept in SQLite, and the folders that belong to them.
package groups

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/fswatch"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Group is one registered chat.
type Group struct {
	JID             string           `json:"jid"`
	Name            string           `json:"name"`
	Folder          string           `json:"folder"`
	Trigger         string           `json:"trigger"`
	RequiresTrigger bool             `json:"requiresTrigger"`
	IsMain          bool             `json:"isMain"`
	Security        *security.Policy `json:"security"`
	AddedAt         time.Time        `json:"addedAt"`
	// Paused: the owner said /pause in the main chat; its messages are
	// kept, and no agent starts for it until /resume.
	Paused bool `json:"paused"`
}

var (
	ErrNotFound        = errors.New("group not found")
	ErrDuplicateJID    = errors.New("a group with this jid is already registered")
	ErrDuplicateFolder = errors.New("a group with this folder is already registered")
	ErrSecondMain      = errors.New("a main group is already registered")
	ErrInvalidFolder   = errors.New("invalid folder name")
)

// ValidFolder checks a folder name (layout.ValidFolder); its error wraps
// ErrInvalidFolder.
func ValidFolder(name string) error {
	if err := layout.ValidFolder(name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidFolder, err)
	}
	return nil
}

// Registry is the groups table.
type Registry struct {
	db        *store.DB
	groupsDir string
	// Assistant is the assistant's name, for the notes of a new group.
	Assistant string
	// Reporter records a link found where a group's folder keeps logs/ or
	// CLAUDE.md (removed, never followed), inside the transaction that
	// registers the group; nil records nothing.
	Reporter Reporter
}

// Reporter records violations inside the caller's transaction
// (alerts.Reporter); Flush follows the commit.
type Reporter interface {
	RecordTx(ctx context.Context, tx *store.Tx, v security.Violation, alert bool) error
	Flush(ctx context.Context) error
}

// txReport is a Reporter bound to one transaction, as groupfs takes it.
type txReport struct {
	tx  *store.Tx
	rep Reporter
}

func (t txReport) Report(ctx context.Context, v security.Violation) error {
	return t.rep.RecordTx(ctx, t.tx, v, true)
}

// New returns the registry kept in db, whose folders live in groupsDir.
func New(db *store.DB, groupsDir string) *Registry {
	return &Registry{db: db, groupsDir: groupsDir}
}

// Dir is the absolute path of a group's folder.
func (r *Registry) Dir(folder string) string { return r.layout().Group(folder) }

func (r *Registry) layout() layout.Layout { return layout.New("", r.groupsDir) }

const columns = `jid, name, folder, trigger, requires_trigger, is_main, security, added_at`

// selected are the columns a Group is read from: what it is registered
// with, and its state.
const selected = columns + `, paused`

func scan(row interface{ Scan(...any) error }) (Group, error) {
	var g Group
	var sec sql.NullString
	var added string
	if err := row.Scan(&g.JID, &g.Name, &g.Folder, &g.Trigger, &g.RequiresTrigger, &g.IsMain, &sec, &added, &g.Paused); err != nil {
		return g, err
	}
	g.AddedAt, _ = time.Parse(time.RFC3339Nano, added)
	if sec.Valid {
		g.Security = new(security.Policy)
		if err := json.Unmarshal([]byte(sec.String), g.Security); err != nil {
			return g, fmt.Errorf("group %s: stored security override: %w", g.Folder, err)
		}
	}
	return g, nil
}

// List returns every group, main first, then by folder.
func (r *Registry) List(ctx context.Context) ([]Group, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT `+selected+` FROM groups ORDER BY is_main DESC, folder`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Group{}
	for rows.Next() {
		g, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

func (r *Registry) one(ctx context.Context, where string, arg any) (Group, error) {
	return one(r.db.QueryRowContext(ctx, `SELECT `+selected+` FROM groups WHERE `+where, arg))
}

func one(row *sql.Row) (Group, error) {
	g, err := scan(row)
	if errors.Is(err, sql.ErrNoRows) {
		return g, ErrNotFound
	}
	return g, err
}

// ByFolder returns the group with that folder, or ErrNotFound.
func (r *Registry) ByFolder(ctx context.Context, folder string) (Group, error) {
	return r.one(ctx, `folder = ?`, folder)
}

// ByJID returns the group of that chat, or ErrNotFound.
func (r *Registry) ByJID(ctx context.Context, jid string) (Group, error) {
	return r.one(ctx, `jid = ?`, jid)
}

// ByJIDTx is ByJID inside the caller's transaction.
func (r *Registry) ByJIDTx(ctx context.Context, tx *store.Tx, jid string) (Group, error) {
	return one(tx.QueryRowContext(ctx, `SELECT `+selected+` FROM groups WHERE jid = ?`, jid))
}

// Main returns the main group, or ErrNotFound.
func (r *Registry) Main(ctx context.Context) (Group, error) {
	return r.one(ctx, `is_main = ?`, 1)
}

// MainChat names the main group's folder and chat; ok is false while no
// main group is registered (or it cannot be read).
func (r *Registry) MainChat(ctx context.Context) (folder, jid string, ok bool) {
	g, err := r.Main(ctx)
	if err != nil {
		return "", "", false
	}
	return g.Folder, g.JID, true
}

// MainFolder names the main group's folder; ok as MainChat's.
func (r *Registry) MainFolder(ctx context.Context) (folder string, ok bool) {
	folder, _, ok = r.MainChat(ctx)
	return folder, ok
}

// Add registers g and creates its folder with a starter CLAUDE.md.
func (r *Registry) Add(ctx context.Context, g Group) error {
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := r.AddTx(ctx, tx, g); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if r.Reporter != nil {
		return r.Reporter.Flush(ctx)
	}
	return nil
}

// AddTx is Add inside the caller's transaction, so that a group registered
// by an IPC file is registered exactly when the journal records the file.
// The folder is created before tx commits; creating it again is harmless.
func (r *Registry) AddTx(ctx context.Context, tx *store.Tx, g Group) error {
	if err := ValidFolder(g.Folder); err != nil {
		return err
	}
	if strings.TrimSpace(g.JID) == "" {
		return errors.New("jid is empty: give the chat's JID, e.g. 120363000000000000@g.us or local:family")
	}
	if strings.TrimSpace(g.Name) == "" {
		g.Name = g.Folder
	}
	if g.AddedAt.IsZero() {
		g.AddedAt = time.Now().UTC()
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM groups WHERE jid = ?`, g.JID).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: %s (remove it first with 'nanoclawd groups remove')", ErrDuplicateJID, g.JID)
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM groups WHERE folder = ?`, g.Folder).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("%w: %s (choose another --folder)", ErrDuplicateFolder, g.Folder)
	}
	if g.IsMain {
		if m, err := scan(tx.QueryRowContext(ctx, `SELECT `+selected+` FROM groups WHERE is_main = 1`)); err == nil {
			return fmt.Errorf("%w (%s); at most one group is main: remove it first or add this one without --main", ErrSecondMain, m.Folder)
		}
	}
	sec, err := encodePolicy(g.Security)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO groups (`+columns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		g.JID, g.Name, g.Folder, g.Trigger, g.RequiresTrigger, g.IsMain, sec, g.AddedAt.UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("register %s: %w", g.Folder, err)
	}
	return r.createFolder(ctx, tx, g)
}

// createFolder makes the group's folder with logs/ and a starter
// CLAUDE.md, keeping what a group wrote there before (it may be registered
// again). The folder may hold what an earlier group planted, so it is
// worked on through groupfs: a link at logs/ or CLAUDE.md is removed and
// reported, never followed.
func (r *Registry) createFolder(ctx context.Context, tx *store.Tx, g Group) error {
	var rep security.Reporter
	if r.Reporter != nil {
		rep = txReport{tx, r.Reporter}
	}
	dir, err := groupfs.Open(r.layout().Group(g.Folder), g.Folder, 0o755, rep)
	if err != nil {
		return fmt.Errorf("create group folder: %w", err)
	}
	defer dir.Close()
	logs, err := dir.Sub(ctx, layout.LogsDir, 0o755)
	if err != nil {
		return fmt.Errorf("create group folder: %w", err)
	}
	logs.Close()
	if _, err := dir.Create(ctx, layout.MemoryFile, []byte(Notes(g, r.Assistant)), 0o644); err != nil {
		return fmt.Errorf("create group folder: %w", err)
	}
	return nil
}

//go:embed templates/*.md
var templatesFS embed.FS

var templates = template.Must(template.ParseFS(templatesFS, "templates/*.md"))

// Notes is the starter CLAUDE.md of a new group: who the assistant is, how
// it writes for WhatsApp, <internal> and send_message, and for the main
// group how it administers groups and tasks. The agent keeps its memory of
// the group in the same file.
func Notes(g Group, assistant string) string {
	if assistant == "" {
		assistant = "Andy"
	}
	trigger := g.Trigger
	if !g.RequiresTrigger || trigger == "" {
		trigger = "any message"
	}
	name := "group.md"
	if g.IsMain {
		name = "main.md"
	}
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name, map[string]string{"Name": g.Name, "Assistant": assistant, "Trigger": trigger}); err != nil {
		panic(err) // the templates are compiled in and tested
	}
	return b.String()
}

// Remove unregisters a group; its folder on disk is kept.
func (r *Registry) Remove(ctx context.Context, folder string) error {
	res, err := r.db.ExecContext(ctx, `DELETE FROM groups WHERE folder = ?`, folder)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", ErrNotFound, folder)
	}
	return nil
}

// SetSecurity sets (or with nil clears) a group's override.
func (r *Registry) SetSecurity(ctx context.Context, folder string, p *security.Policy) error {
	return setSecurity(ctx, r.db, folder, p)
}

// SetSecurityTx is SetSecurity inside the caller's transaction, for a
// change that must commit with its record (an owner's /allow).
func SetSecurityTx(ctx context.Context, tx *store.Tx, folder string, p *security.Policy) error {
	return setSecurity(ctx, tx, folder, p)
}

func setSecurity(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, folder string, p *security.Policy) error {
	sec, err := encodePolicy(p)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, `UPDATE groups SET security = ? WHERE folder = ?`, sec, folder)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", ErrNotFound, folder)
	}
	return nil
}

// SetPausedTx pauses or resumes a group inside the caller's transaction.
func SetPausedTx(ctx context.Context, tx *store.Tx, folder string, paused bool) error {
	res, err := tx.ExecContext(ctx, `UPDATE groups SET paused = ? WHERE folder = ?`, paused, folder)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", ErrNotFound, folder)
	}
	return nil
}

// ByFolderTx reads one group inside the caller's transaction.
func ByFolderTx(ctx context.Context, tx *store.Tx, folder string) (Group, error) {
	g, err := scan(tx.QueryRowContext(ctx, `SELECT `+selected+` FROM groups WHERE folder = ?`, folder))
	if errors.Is(err, sql.ErrNoRows) {
		return g, fmt.Errorf("%w: %s", ErrNotFound, folder)
	}
	return g, err
}

func encodePolicy(p *security.Policy) (any, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// ChangedFile is the file the CLI touches after changing the registry; the
// running daemon watches it and reloads the groups.
func ChangedFile(dataDir string) string { return layout.New(dataDir, "").GroupsChanged() }

// NotifyChanged tells a running daemon that the registry changed, so the
// change takes effect without a restart.
func NotifyChanged(dataDir string) error {
	return os.WriteFile(ChangedFile(dataDir), []byte(strconv.Itoa(os.Getpid())), 0o600)
}

// WatchChanges returns a channel that receives after NotifyChanged.
func WatchChanges(ctx context.Context, dataDir string) (<-chan struct{}, error) {
	return fswatch.File(ctx, ChangedFile(dataDir), 0)
}

// Policy is what policy resolution needs to know of g.
func (g Group) Policy() security.Group {
	return security.Group{Folder: g.Folder, IsMain: g.IsMain, Override: g.Security}
}

// Provider is the provider g's override names, "" for the config's.
func (g Group) Provider() string {
	if g.Security == nil {
		return ""
	}
	return g.Security.Provider
}

// Folders lists the folders of list, for policy resolution (every other
// group's folder is denied to a group).
func Folders(list []Group) []string {
	out := make([]string, len(list))
	for i, g := range list {
		out[i] = g.Folder
	}
	return out
}
