package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Set turns a key on in the owner's file and keeps everything else as it
// was written; a missing file starts as the shipped template; an edit that
// would not load is not written.
func TestSet(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, DefaultFile)
	cfg, err := Set(missing, "channels.local.enabled", true)
	if err != nil || !cfg.Channels.Local.Enabled {
		t.Fatalf("from the template: %+v, %v", cfg, err)
	}
	b, _ := os.ReadFile(missing)
	if got := bytes.Replace(b, []byte(`"enabled": true,
      // Path of the socket`), []byte(`"enabled": false,
      // Path of the socket`), 1); !bytes.Equal(got, Template) {
		t.Errorf("the new file is not the template with the one key changed:\n%s", b)
	}

	own := filepath.Join(dir, "own.jsonc")
	os.WriteFile(own, []byte("{\n  // mine\n  \"assistantName\": \"Bob\",\n}\n"), 0o600)
	cfg, err = Set(own, "channels.local.enabled", true)
	if err != nil || !cfg.Channels.Local.Enabled || cfg.AssistantName != "Bob" {
		t.Fatalf("own file: %+v, %v", cfg, err)
	}
	b, _ = os.ReadFile(own)
	if !strings.Contains(string(b), "// mine") {
		t.Errorf("the owner's comment is gone:\n%s", b)
	}
	if fi, _ := os.Stat(own); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode changed to %v", fi.Mode())
	}
	if again, err := Load(own); err != nil || !again.Channels.Local.Enabled {
		t.Errorf("reloaded: %+v, %v", again, err)
	}

	if _, err := Set(own, "channels.local.enabled", "yes"); err == nil || !strings.Contains(err.Error(), "unchanged") {
		t.Errorf("an invalid value: %v", err)
	}
	if b2, _ := os.ReadFile(own); !bytes.Equal(b, b2) {
		t.Errorf("an invalid edit was written:\n%s", b2)
	}
}
