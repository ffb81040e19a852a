// Package nanoclaw imports an installation of NanoClaw (v1): its
// registered_groups.json, or its SQLite database (store/messages.db) with
// the groups, scheduled tasks and sessions in it and the groups/*/CLAUDE.md
// memories beside it. Load reads the source into a Plan; Apply carries the
// plan out (or, dry, only says what it would do). Everything already there
// is left alone, so importing twice changes nothing.
package nanoclaw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

// Plan is what a NanoClaw installation holds that nanoclawd can take over.
type Plan struct {
	Source   string
	Groups   []Group          // in jid order
	Tasks    []scheduler.Task // in id order
	Sessions []Session
	// GroupsDir is NanoClaw's groups/ folder with the CLAUDE.md memories;
	// "" when there is none beside the source.
	GroupsDir string
	// Skipped says what is not carried over, and why.
	Skipped []string
}

// Group is a registered group to import; Trigger "" = the default.
type Group struct {
	groups.Group
}

// Session is the agent session a group was in.
type Session struct{ Folder, ID string }

var sqliteMagic = []byte("SQLite format 3\x00")

// Load reads a NanoClaw registered_groups.json or SQLite database.
func Load(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	head := make([]byte, len(sqliteMagic))
	n, _ := f.Read(head)
	f.Close()
	if bytes.Equal(head[:n], sqliteMagic) {
		p, err := loadDB(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		// NanoClaw keeps store/messages.db beside groups/.
		p.GroupsDir = existingDir(filepath.Join(filepath.Dir(filepath.Dir(path)), "groups"))
		return p, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	p, err := loadJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	p.Source = path
	// registered_groups.json lives in data/, beside groups/.
	p.GroupsDir = existingDir(filepath.Join(filepath.Dir(filepath.Dir(path)), "groups"))
	return p, nil
}

func existingDir(dir string) string {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir
	}
	return ""
}

// jsonEntry is one value of NanoClaw's registered_groups.json.
type jsonEntry struct {
	Name            string `json:"name"`
	Folder          string `json:"folder"`
	Trigger         string `json:"trigger"`
	AddedAt         string `json:"added_at"`
	RequiresTrigger *bool  `json:"requiresTrigger"`
	IsMain          bool   `json:"isMain"`
}

func loadJSON(data []byte) (*Plan, error) {
	var entries map[string]jsonEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("not a NanoClaw registered_groups.json (want {\"<jid>\": {\"name\", \"folder\", \"trigger\", \"added_at\"}}) nor its SQLite database: %w", err)
	}
	p := &Plan{}
	for jid, e := range entries {
		g := groups.Group{JID: jid, Name: e.Name, Folder: e.Folder, Trigger: e.Trigger, RequiresTrigger: true,
			IsMain: e.IsMain || e.Folder == "main", AddedAt: parseTime(e.AddedAt)}
		if e.RequiresTrigger != nil {
			g.RequiresTrigger = *e.RequiresTrigger
		}
		p.Groups = append(p.Groups, Group{g})
	}
	p.sort()
	return p, nil
}

func (p *Plan) sort() {
	slices.SortFunc(p.Groups, func(a, b Group) int {
		// A main group first, so it is the one that becomes main.
		if a.IsMain != b.IsMain {
			if a.IsMain {
				return -1
			}
			return 1
		}
		return cmpStr(a.JID, b.JID)
	})
	slices.SortFunc(p.Tasks, func(a, b scheduler.Task) int { return cmpStr(a.ID, b.ID) })
	slices.SortFunc(p.Sessions, func(a, b Session) int { return cmpStr(a.Folder, b.Folder) })
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseTime reads NanoClaw's ISO timestamps (Date.toISOString); zero when
// absent or unreadable.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

var errNotNanoClaw = errors.New("not a NanoClaw database: it has no registered_groups table (the file NanoClaw uses is store/messages.db)")
