package config

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/fswatch"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Keys tagged reload:"restart" (assistantName, dataDir, …) are read only
// when the daemon starts. A reload keeps their running values, so what
// the daemon reports stays true, and names them as waiting for a restart;
// every other key applies to the next agent run.

// Watch returns a channel that receives when file, or the env file beside
// it, has changed and settled (editors write in bursts). Reload it then.
func Watch(ctx context.Context, file string) (<-chan struct{}, error) {
	return fswatch.Files(ctx, 100*time.Millisecond, file, EnvFile(file))
}

// Reload loads the env file and old.File again. The result keeps old's
// restart-only values; live lists the dotted keys whose new values apply
// now, and each variable of the env file that changed as "nanoclawd.env
// NAME" (from the next agent run on); restart lists the keys that changed
// in the file but wait for a restart. On error old stays in force.
func Reload(old *Config) (cfg *Config, live, restart []string, err error) {
	vars, err := LoadEnv(old.File)
	if err != nil {
		return nil, nil, nil, err
	}
	if cfg, err = read(old.File); err != nil {
		return nil, nil, nil, err
	}
	live, restart = Diff(old, cfg)
	for _, name := range vars {
		live = append(live, layout.EnvFile+" "+name)
	}
	cfg.KeepRestartOnly(old)
	return cfg, live, restart, nil
}

// Diff lists the dotted keys whose values differ between a and b, split
// into those applied live and the restart-only ones.
func Diff(a, b *Config) (live, restart []string) {
	walkKeys(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "", false, func(key string, x, y reflect.Value, restartOnly bool) {
		if reflect.DeepEqual(x.Interface(), y.Interface()) {
			return
		}
		if restartOnly {
			restart = append(restart, key)
		} else {
			live = append(live, key)
		}
	})
	slices.Sort(live)
	slices.Sort(restart)
	return live, restart
}

// KeepRestartOnly sets c's restart-only keys to old's values.
func (c *Config) KeepRestartOnly(old *Config) {
	walkKeys(reflect.ValueOf(c).Elem(), reflect.ValueOf(old).Elem(), "", false, func(_ string, x, y reflect.Value, restartOnly bool) {
		if restartOnly {
			x.Set(y)
		}
	})
}

// walkKeys calls leaf for each pair of leaves of two values of one struct
// type, named by their dotted JSON keys. A struct behind a pointer is
// walked into when both sides have one; a pointer set on one side only is
// a leaf.
func walkKeys(a, b reflect.Value, prefix string, restart bool, leaf func(key string, a, b reflect.Value, restartOnly bool)) {
	if a.Kind() == reflect.Pointer && a.Type().Elem().Kind() == reflect.Struct && !a.IsNil() && !b.IsNil() {
		a, b = a.Elem(), b.Elem()
	}
	if a.Kind() != reflect.Struct || a.Type() == reflect.TypeOf(time.Time{}) {
		leaf(prefix, a, b, restart)
		return
	}
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || name == "" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		walkKeys(a.Field(i), b.Field(i), key, restart || f.Tag.Get("reload") == "restart", leaf)
	}
}
