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
