package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/tailscale/hujson"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
)

// Set writes value at the dotted key (e.g. "channels.local.enabled") into
// the config file, for the setup guide: the rest of the file, comments
// included, stays as the owner wrote it. A missing file is first made from
// the template that ships with nanoclawd. The result must load, or nothing
// is written; it returns the config as loaded from the new file.
func Set(file, key string, value any) (*Config, error) {
	src, err := os.ReadFile(file)
	mode := fs.FileMode(0o644)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		src = Template
	case err != nil:
		return nil, fmt.Errorf("read config: %w", err)
	default:
		if fi, err := os.Stat(file); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	doc, err := hujson.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (fix it with 'nanoclawd config check', then try again)", file, err)
	}
	parts := strings.Split(key, ".")
	ptr, added := "", false
	for i, p := range parts {
		ptr += "/" + p
		last, exists := i == len(parts)-1, doc.Find(ptr) != nil
		if !last && exists {
			continue
		}
		added = added || !exists
		var v any = value
		if !last {
			v = map[string]any{} // a parent the file does not have yet
		}
		b, err := json.Marshal([]map[string]any{{"op": "add", "path": ptr, "value": v}})
		if err != nil {
			return nil, err
		}
		if err := doc.Patch(b); err != nil {
			return nil, fmt.Errorf("%s: set %s: %w", file, key, err)
		}
	}
	if added {
		doc.Format() // a new member in line with the rest (a replaced value keeps its place)
	}
	out := doc.Pack()
	cfg, err := Parse(file, out)
	if err != nil {
		return nil, fmt.Errorf("setting %s would leave %s invalid, so it is unchanged:\n%w", key, file, err)
	}
	if err := atomicfile.Write(file, out, mode); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	return cfg, nil
}
