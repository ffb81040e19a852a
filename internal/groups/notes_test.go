package groups

import (
	"strings"
	"testing"
)

func TestNotes(t *testing.T) {
	group := Notes(Group{Name: "Family", Folder: "family", Trigger: "@Bob", RequiresTrigger: true}, "Bob")
	for _, want := range []string{"You are Bob", `"Family"`, "@Bob", "<internal>", "send_message", "*bold*", "sandbox"} {
		if !strings.Contains(group, want) {
			t.Errorf("group notes lack %q:\n%s", want, group)
		}
	}
	if strings.Contains(group, "register_group") {
		t.Error("a group's notes explain administration")
	}
	main := Notes(Group{Name: "Me", Folder: "main", IsMain: true}, "")
	for _, want := range []string{"You are Andy", "register_group", "available_groups.json", "schedule_task", "list_tasks", "global/CLAUDE.md", "[SANDBOX ALERT]"} {
		if !strings.Contains(main, want) {
			t.Errorf("main notes lack %q:\n%s", want, main)
		}
	}
}
