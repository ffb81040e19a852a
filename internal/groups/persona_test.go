package groups_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Registering writes the persona for the kind of group, with the
// assistant's name, and never replaces a CLAUDE.md that is already there.
func TestAddWritesPersonaOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := groups.New(db, filepath.Join(dir, "groups"), "Bob")
	if err := reg.Add(ctx, groups.Group{JID: "m@s.whatsapp.net", Name: "Me", Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(ctx, groups.Group{JID: "f@g.us", Name: "Family", Folder: "family", Trigger: "@Bob", RequiresTrigger: true}); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "groups", "work", groups.MemoryFile)
	os.MkdirAll(filepath.Dir(kept), 0o755)
	os.WriteFile(kept, []byte("my own notes\n"), 0o644)
	if err := reg.Add(ctx, groups.Group{JID: "w@g.us", Name: "Work", Folder: "work"}); err != nil {
		t.Fatal(err)
	}
	read := func(folder string) string {
		b, err := os.ReadFile(filepath.Join(dir, "groups", folder, groups.MemoryFile))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	main, fam := read("main"), read("family")
	for _, want := range []string{"You are Bob", "main channel", "register_group", "schedule_task", "<internal>", "send_message", reg.GlobalMemory()} {
		if !strings.Contains(main, want) {
			t.Errorf("main persona lacks %q", want)
		}
	}
	for _, want := range []string{"You are Bob", `"Family"`, "@Bob", "*bold*", "<internal>", "send_message", "global memory"} {
		if !strings.Contains(fam, want) {
			t.Errorf("group persona lacks %q", want)
		}
	}
	if strings.Contains(fam, "register_group") {
		t.Error("a non-main persona explains group admin")
	}
	if got := read("work"); got != "my own notes\n" {
		t.Errorf("an existing CLAUDE.md was replaced: %q", got)
	}
}
