package nanoclaw

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the NanoClaw database is SQLite

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// loadDB reads NanoClaw's SQLite database read-only. Columns NanoClaw added
// over time (is_main, context_mode, script, …) may be missing from an
// older file; rows are read by column name so any version works.
func loadDB(path string) (*Plan, error) {
	db, err := sql.Open("sqlite3", "file:"+url.PathEscape(path)+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'registered_groups'`).Scan(&n); err != nil {
		return nil, fmt.Errorf("open the database: %w", err)
	}
	if n == 0 {
		return nil, errNotNanoClaw
	}
	p := &Plan{Source: path}
	rows, err := records(db, "registered_groups")
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		g := groups.Group{JID: r.str("jid"), Name: r.str("name"), Folder: r.str("folder"), Trigger: r.str("trigger_pattern"),
			RequiresTrigger: r.boolOr("requires_trigger", true), AddedAt: parseTime(r.str("added_at"))}
		if _, ok := r["is_main"]; ok {
			g.IsMain = r.boolOr("is_main", false)
		} else {
			g.IsMain = g.Folder == "main" // NanoClaw's own backfill rule
		}
		if cc := r.str("container_config"); cc != "" {
			g.Security = p.containerConfig(g.Folder, cc)
		}
		p.Groups = append(p.Groups, Group{g})
	}
	if rows, err = records(db, "scheduled_tasks"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		t := scheduler.Task{ID: r.str("id"), GroupFolder: r.str("group_folder"), ChatJID: r.str("chat_jid"), Prompt: r.str("prompt"),
			ScheduleType: r.str("schedule_type"), ScheduleValue: r.str("schedule_value"), ContextMode: r.str("context_mode"),
			Status: r.str("status"), LastResult: r.str("last_result"), CreatedAt: parseTime(r.str("created_at"))}
		if t.ContextMode == "" {
			t.ContextMode = scheduler.ContextIsolated // NanoClaw's column default
		}
		if t.Status == "" {
			t.Status = scheduler.StatusActive
		}
		if next := parseTime(r.str("next_run")); !next.IsZero() {
			t.NextRun = &next
		}
		if last := parseTime(r.str("last_run")); !last.IsZero() {
			t.LastRun = &last
		}
		if s := r.str("script"); s != "" {
			p.Skipped = append(p.Skipped, fmt.Sprintf("task %s: its pre-check script (nanoclawd runs the prompt alone)", t.ID))
		}
		if err := scheduler.Validate(t.ScheduleType, t.ScheduleValue); err != nil && t.Status == scheduler.StatusActive {
			p.Skipped = append(p.Skipped, fmt.Sprintf("task %s: %v", t.ID, err))
			continue
		}
		p.Tasks = append(p.Tasks, t)
	}
	if rows, err = records(db, "sessions"); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if id := r.str("session_id"); id != "" {
			p.Sessions = append(p.Sessions, Session{Folder: r.str("group_folder"), ID: id})
		}
	}
	p.sort()
	return p, nil
}

// containerConfig turns NanoClaw's per-group container settings into a
// security override: writable extra mounts become allowWrite; what has no
// counterpart is listed in Skipped.
func (p *Plan) containerConfig(folder, raw string) *security.Policy {
	var cc struct {
		AdditionalMounts []struct {
			HostPath string `json:"hostPath"`
			ReadOnly *bool  `json:"readonly"`
		} `json:"additionalMounts"`
		Timeout int `json:"timeout"`
	}
	if err := json.Unmarshal([]byte(raw), &cc); err != nil {
		p.Skipped = append(p.Skipped, fmt.Sprintf("group %s: container_config is not JSON (%v)", folder, err))
		return nil
	}
	var pol security.Policy
	for _, m := range cc.AdditionalMounts {
		switch {
		case m.HostPath == "":
		case m.ReadOnly != nil && !*m.ReadOnly:
			pol.AllowWrite = append(pol.AllowWrite, m.HostPath)
		default:
			p.Skipped = append(p.Skipped, fmt.Sprintf("group %s: read-only mount %s (give the group read access in its override if it needs it)", folder, m.HostPath))
		}
	}
	if cc.Timeout > 0 {
		p.Skipped = append(p.Skipped, fmt.Sprintf("group %s: container timeout %d ms (nanoclawd uses agent.timeout for every group)", folder, cc.Timeout))
	}
	if pol.AllowWrite == nil {
		return nil
	}
	return &pol
}

// record is one row by column name.
type record map[string]any

func (r record) str(col string) string {
	switch v := r[col].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (r record) boolOr(col string, def bool) bool {
	switch v := r[col].(type) {
	case int64:
		return v != 0
	case nil:
		return def
	default:
		s := strings.TrimSpace(r.str(col))
		return s != "0" && s != "" && s != "false"
	}
}

// records reads every row of table; none when the table does not exist.
func records(db *sql.DB, table string) ([]record, error) {
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n == 0 {
		return nil, err
	}
	rows, err := db.Query(`SELECT * FROM ` + table)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []record
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		r := record{}
		for i, c := range cols {
			r[c] = vals[i]
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
