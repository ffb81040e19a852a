package groups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// nanoclawEntry is one value of NanoClaw's registered_groups.json.
type nanoclawEntry struct {
	Name            string `json:"name"`
	Folder          string `json:"folder"`
	Trigger         string `json:"trigger"`
	AddedAt         string `json:"added_at"`
	RequiresTrigger *bool  `json:"requiresTrigger"`
}

// ImportResult says what an import did.
type ImportResult struct {
	Added, Unchanged []string // folders
}

// Import registers the groups of a NanoClaw registered_groups.json
// ({jid: {name, folder, trigger, added_at, requiresTrigger?}}). A group
// already registered with the same jid and folder is left as it is, so
// importing twice changes nothing. NanoClaw's "main" folder becomes the
// main group unless one exists. defaultTrigger fills a missing trigger.
func (r *Registry) Import(ctx context.Context, data []byte, defaultTrigger string) (ImportResult, error) {
	var res ImportResult
	var entries map[string]nanoclawEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return res, fmt.Errorf("not a NanoClaw registered_groups.json (want {\"<jid>\": {\"name\", \"folder\", \"trigger\", \"added_at\"}}): %w", err)
	}
	jids := make([]string, 0, len(entries))
	for jid := range entries {
		jids = append(jids, jid)
	}
	slices.Sort(jids)
	_, err := r.Main(ctx)
	haveMain := err == nil
	for _, jid := range jids {
		e := entries[jid]
		if existing, err := r.ByJID(ctx, jid); err == nil {
			if existing.Folder != e.Folder {
				return res, fmt.Errorf("%s: already registered with folder %q, the file says %q; remove one first", jid, existing.Folder, e.Folder)
			}
			res.Unchanged = append(res.Unchanged, e.Folder)
			continue
		} else if !errors.Is(err, ErrNotFound) {
			return res, err
		}
		g := Group{JID: jid, Name: e.Name, Folder: e.Folder, Trigger: e.Trigger, RequiresTrigger: true}
		if g.Trigger == "" {
			g.Trigger = defaultTrigger
		}
		if e.RequiresTrigger != nil {
			g.RequiresTrigger = *e.RequiresTrigger
		}
		if e.Folder == "main" && !haveMain {
			g.IsMain, g.RequiresTrigger, haveMain = true, false, true
		}
		if t, err := time.Parse(time.RFC3339Nano, e.AddedAt); err == nil {
			g.AddedAt = t
		}
		if err := r.Add(ctx, g); err != nil {
			return res, fmt.Errorf("%s: %w", jid, err)
		}
		res.Added = append(res.Added, g.Folder)
	}
	return res, nil
}
