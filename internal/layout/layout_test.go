package layout

import (
	"strings"
	"testing"
)

func TestValidFolder(t *testing.T) {
	for name, ok := range map[string]bool{
		"family": true, "Work_2": true, "a-b": true, "9lives": true, strings.Repeat("a", 64): true,
		"": false, "_x": false, "-x": false, ".hidden": false, "a/b": false, "../evil": false, "a b": false,
		"über": false, strings.Repeat("a", 65): false, "global": false, "GLOBAL": false, "errors": false,
	} {
		if err := ValidFolder(name); (err == nil) != ok {
			t.Errorf("ValidFolder(%q) = %v; want ok %v", name, err, ok)
		}
	}
}

// The Claude CLI's names for a working directory, as its own JavaScript
// makes them (SDK 0.3.330, run on these paths with node).
func TestClaudeProject(t *testing.T) {
	for cwd, want := range map[string]string{
		"/home/ann/nanoclaw/groups/main":           "-home-ann-nanoclaw-groups-main",
		"/Users/ann.b/My Claw/groups/main":         "-Users-ann-b-My-Claw-groups-main",
		"/srv/über/😀/main":                         "-srv--ber----main", // ü is one unit, 😀 two
		"/x/" + strings.Repeat("a", 250) + "/main": "-x-" + strings.Repeat("a", 197) + "-pabo66",
		"/y/" + strings.Repeat("b", 300):           "-y-" + strings.Repeat("b", 197) + "-kq2vnf",
	} {
		if got := ClaudeProject("/c", cwd); got != "/c/projects/"+want {
			t.Errorf("ClaudeProject(%q) = %q, want /c/projects/%s", cwd, got, want)
		}
	}
}
