// Package nanoclaw reads a NanoClaw (v1) installation — its SQLite
// database (store/messages.db: registered_groups, scheduled_tasks,
// sessions) and the groups/*/CLAUDE.md beside it — and imports it into
// nanoclawd: groups with their main flag, trigger and extra mounts, active
// and paused tasks, session ids, and each group's notes. Importing twice
// changes nothing the second time.
package nanoclaw

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// IsSQLite tells whether data starts like a SQLite database file.
func IsSQLite(data []byte) bool { return strings.HasPrefix(string(data), "SQLite format 3\x00") }

// Group is one row of NanoClaw's registered_groups.
type Group struct {
	JID, Name, Folder, Trigger, AddedAt string
	RequiresTrigger, IsMain             bool
	Mounts                              []Mount // containerConfig.additionalMounts
	Notes                               string  // its groups/<folder>/CLAUDE.md, if any
}

// Mount is one of a group's additional mounts.
type Mount struct {
	HostPath string `json:"hostPath"`
	ReadOnly *bool  `json:"readonly"`
}

// Task is one active or paused row of NanoClaw's scheduled_tasks.
type Task struct {
	ID, Folder, ChatJID, Prompt, ScheduleType, ScheduleValue, ContextMode, Status string
}

// Install is what was read from a NanoClaw installation.
type Install struct {
	Groups      []Group
	Tasks       []Task
	Sessions    map[string]string // folder → session id
	GlobalNotes string            // groups/global/CLAUDE.md
}

// Read opens NanoClaw's database at path read-only and reads what an
// import needs; the notes come from the groups/ dir of the installation
// (beside store/, where the database lives).
func Read(ctx context.Context, path string) (*Install, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite3", "file:"+abs+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	in := &Install{Sessions: map[string]string{}}
	hasMain, err := hasColumn(ctx, db, "registered_groups", "is_main")
	if err != nil {
		return nil, fmt.Errorf("not a NanoClaw database (no registered_groups table): %w", err)
	}
	mainCol := "folder = 'main'"
	if hasMain {
		mainCol = "COALESCE(is_main, 0)"
	}
	rows, err := db.QueryContext(ctx, `SELECT jid, name, folder, trigger_pattern, COALESCE(added_at, ''),
		COALESCE(container_config, ''), COALESCE(requires_trigger, 1), `+mainCol+` FROM registered_groups ORDER BY folder`)
	if err != nil {
		return nil, fmt.Errorf("read registered_groups: %w", err)
	}
	root := filepath.Dir(filepath.Dir(abs)) // <nanoclaw>/store/messages.db → <nanoclaw>
	for rows.Next() {
		var g Group
		var cc string
		if err := rows.Scan(&g.JID, &g.Name, &g.Folder, &g.Trigger, &g.AddedAt, &cc, &g.RequiresTrigger, &g.IsMain); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read registered_groups: %w", err)
		}
		if cc != "" {
			var conf struct {
				AdditionalMounts []Mount `json:"additionalMounts"`
			}
			if err := json.Unmarshal([]byte(cc), &conf); err != nil {
				rows.Close()
				return nil, fmt.Errorf("group %s: container_config is not JSON: %w", g.Folder, err)
			}
			g.Mounts = conf.AdditionalMounts
		}
		if b, err := os.ReadFile(filepath.Join(root, "groups", g.Folder, "CLAUDE.md")); err == nil {
			g.Notes = string(b)
		}
		in.Groups = append(in.Groups, g)
	}
	rows.Close()
	if b, err := os.ReadFile(filepath.Join(root, "groups", "global", "CLAUDE.md")); err == nil {
		in.GlobalNotes = string(b)
	}
	if ok, _ := hasColumn(ctx, db, "scheduled_tasks", "id"); ok {
		ctxCol := "'group'"
		if has, _ := hasColumn(ctx, db, "scheduled_tasks", "context_mode"); has {
			ctxCol = "COALESCE(context_mode, 'isolated')"
		}
		rows, err := db.QueryContext(ctx, `SELECT id, group_folder, chat_jid, prompt, schedule_type, schedule_value, `+ctxCol+`,
			COALESCE(status, 'active') FROM scheduled_tasks WHERE COALESCE(status, 'active') IN ('active', 'paused') ORDER BY created_at, id`)
		if err != nil {
			return nil, fmt.Errorf("read scheduled_tasks: %w", err)
		}
		for rows.Next() {
			var t Task
			if err := rows.Scan(&t.ID, &t.Folder, &t.ChatJID, &t.Prompt, &t.ScheduleType, &t.ScheduleValue, &t.ContextMode, &t.Status); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read scheduled_tasks: %w", err)
			}
			in.Tasks = append(in.Tasks, t)
		}
		rows.Close()
	}
	if ok, _ := hasColumn(ctx, db, "sessions", "session_id"); ok {
		rows, err := db.QueryContext(ctx, `SELECT group_folder, session_id FROM sessions`)
		if err != nil {
			return nil, fmt.Errorf("read sessions: %w", err)
		}
		for rows.Next() {
			var f, id string
			if err := rows.Scan(&f, &id); err == nil {
				in.Sessions[f] = id
			}
		}
		rows.Close()
	}
	return in, nil
}

func hasColumn(ctx context.Context, db *sql.DB, table, column string) (bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := false
	tableExists := false
	for rows.Next() {
		tableExists = true
		var name string
		if rows.Scan(&name) == nil && name == column {
			found = true
		}
	}
	if !tableExists {
		return false, fmt.Errorf("no table %s", table)
	}
	return found, rows.Err()
}

// ReadJSON reads NanoClaw's older registered_groups.json
// ({jid: {name, folder, trigger, added_at, requiresTrigger?, containerConfig?}});
// NanoClaw's "main" folder is its main group.
func ReadJSON(data []byte) (*Install, error) {
	var entries map[string]struct {
		Name            string `json:"name"`
		Folder          string `json:"folder"`
		Trigger         string `json:"trigger"`
		AddedAt         string `json:"added_at"`
		RequiresTrigger *bool  `json:"requiresTrigger"`
		IsMain          *bool  `json:"isMain"`
		ContainerConfig *struct {
			AdditionalMounts []Mount `json:"additionalMounts"`
		} `json:"containerConfig"`
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("not a NanoClaw registered_groups.json (want {\"<jid>\": {\"name\", \"folder\", \"trigger\", \"added_at\"}}) nor its SQLite database: %w", err)
	}
	in := &Install{Sessions: map[string]string{}}
	for jid, e := range entries {
		g := Group{JID: jid, Name: e.Name, Folder: e.Folder, Trigger: e.Trigger, AddedAt: e.AddedAt, RequiresTrigger: true,
			IsMain: e.Folder == "main"}
		if e.RequiresTrigger != nil {
			g.RequiresTrigger = *e.RequiresTrigger
		}
		if e.IsMain != nil {
			g.IsMain = *e.IsMain
		}
		if e.ContainerConfig != nil {
			g.Mounts = e.ContainerConfig.AdditionalMounts
		}
		in.Groups = append(in.Groups, g)
	}
	slices.SortFunc(in.Groups, func(a, b Group) int { return strings.Compare(a.JID, b.JID) })
	return in, nil
}
