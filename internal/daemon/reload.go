package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
)

// restartKeys are read only at start; a change to them is logged as
// needing a restart and otherwise ignored. assistantName is among them
// because the WhatsApp channel prefixes replies with it and recognises its
// own echoes by it.
var restartKeys = []string{"assistantName", "dataDir", "groupsDir", "channels", "agent.maxConcurrent", "alerts", "timezone"}

// watchConfig reloads the config file when it changes. A valid edit
// applies to the next agent run; an invalid one keeps the last good config
// and is reported in the log and to the main group. Editors replace files
// in many ways (write, rename over, remove and create), so the directory is
// watched, not the file.
func (d *Daemon) watchConfig(ctx context.Context) error {
	file := d.Config().File
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer fsw.Close()
	if err := fsw.Add(filepath.Dir(file)); err != nil {
		return fmt.Errorf("watch config directory: %w", err)
	}
	// Editors write in bursts; settle before reading.
	var settle <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-fsw.Errors:
			d.log.Warn().Err(err).Msg("config watch")
		case ev := <-fsw.Events:
			if filepath.Clean(ev.Name) == file && !ev.Has(fsnotify.Chmod) {
				settle = time.After(100 * time.Millisecond)
			}
		case <-settle:
			settle = nil
			d.reload(ctx)
		}
	}
}

func (d *Daemon) reload(ctx context.Context) {
	old := d.Config()
	cfg, err := config.Load(old.File)
	if err != nil {
		var errs config.Errors
		lines := []string{err.Error()}
		if errors.As(err, &errs) {
			lines = strings.Split(errs.Error(), "\n")
		}
		for _, l := range lines {
			d.log.Error().Str("problem", l).Msg("config edit is invalid; keeping the last good config")
		}
		d.tellMain(ctx, fmt.Sprintf("nanoclawd: the edit to %s is invalid, so the last good config stays in force:\n%s\nFix it (nanoclawd config check).", filepath.Base(old.File), strings.Join(lines, "\n")))
		return
	}
	changed, restart := diffConfig(old, cfg)
	d.setPendingRestart(restart)
	if len(changed) == 0 && len(restart) == 0 {
		return
	}
	// Keys read only at start keep their running values, so what the
	// daemon reports stays true.
	cfg.AssistantName, cfg.DataDir, cfg.GroupsDir, cfg.Channels, cfg.Timezone = old.AssistantName, old.DataDir, old.GroupsDir, old.Channels, old.Timezone
	cfg.Agent.MaxConcurrent, cfg.Alerts = old.Agent.MaxConcurrent, old.Alerts
	d.cfg.Store(cfg)
	d.router.RefreshWarm(ctx) // agents started ahead with the old config make way
	ev := d.log.Info().Strs("changed", changed)
	if len(restart) > 0 {
		ev = ev.Strs("needRestart", restart)
	}
	ev.Msg("config reloaded; changes apply to the next agent run")
}

// diffConfig lists the dotted keys whose values differ, split into those
// applied live and those that need a restart.
func diffConfig(a, b *config.Config) (changed, restart []string) {
	flat := func(c *config.Config) map[string]string {
		raw, _ := json.Marshal(c)
		var m map[string]any
		json.Unmarshal(raw, &m)
		out := map[string]string{}
		var walk func(prefix string, v any)
		walk = func(prefix string, v any) {
			if obj, ok := v.(map[string]any); ok && prefix != "agent.command" {
				for k, x := range obj {
					walk(strings.TrimPrefix(prefix+"."+k, "."), x)
				}
				return
			}
			s, _ := json.Marshal(v)
			out[prefix] = string(s)
		}
		walk("", m)
		return out
	}
	fa, fb := flat(a), flat(b)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	for k := range keys {
		if reflect.DeepEqual(fa[k], fb[k]) {
			continue
		}
		if slices.ContainsFunc(restartKeys, func(r string) bool { return k == r || strings.HasPrefix(k, r+".") }) {
			restart = append(restart, k)
		} else {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	slices.Sort(restart)
	return changed, restart
}

// tellMain queues text for the main group's chat, if there is one.
func (d *Daemon) tellMain(ctx context.Context, text string) {
	_, jid, ok := d.mainGroup(ctx)
	if !ok {
		return
	}
	if _, err := d.outbox.Enqueue(ctx, jid, text, outbox.KindNotice); err != nil {
		d.log.Error().Err(err).Msg("tell the main group")
	}
}
