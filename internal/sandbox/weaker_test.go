package sandbox

import (
	"os"
	"strings"
	"testing"
)

// Every way macOS is weaker is said in docs/security.md, word for word,
// and Linux has none.
func TestWeakerIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := Weaker("darwin")
	if len(lines) == 0 || len(Weaker("linux")) != 0 {
		t.Fatalf("Weaker: darwin %q, linux %q", lines, Weaker("linux"))
	}
	for _, l := range lines {
		if len(l) > 120 || strings.Contains(l, "\n") {
			t.Errorf("%q is not one short line", l)
		}
		if !strings.Contains(string(doc), l) {
			t.Errorf("docs/security.md does not say %q", l)
		}
	}
}
