package whatsapp

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func TestToWhatsApp(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"**bold**", "*bold*"},
		{"__bold__", "*bold*"},
		{"*italic*", "_italic_"},
		{"_italic_", "_italic_"},
		{"***both***", "*_both_*"},
		{"~~gone~~", "~gone~"},
		{"a **b** and *c*", "a *b* and _c_"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{"denied: **/.env and **/*.pem", "denied: **/.env and **/*.pem"},
		{"*.pem or *.key", "*.pem or *.key"},
		{"src/*/main.go", "src/*/main.go"},
		{"x*y*z", "x*y*z"},
		{"(*aside*), **done**.", "(_aside_), *done*."},
		{"`**raw**` and **b**", "`**raw**` and *b*"},
		{"unclosed `code **b**", "unclosed `code *b*"},
		{"# Title", "*Title*"},
		{"### **Bold title** ###", "*Bold title*"},
		{"* item", "- item"},
		{"  + nested", "  - nested"},
		{"- item", "- item"},
		{"1. first", "1. first"},
		{"> quote *it*", "> quote _it_"},
		{"[docs](https://x.dev/a)", "docs (https://x.dev/a)"},
		{"[https://x.dev](https://x.dev)", "https://x.dev"},
		{"![cat](https://x.dev/c.png)", "cat (https://x.dev/c.png)"},
		{"[a](https://x.dev \"title\")", "a (https://x.dev)"},
		{"---", "―――"},
		{"* * *", "―――"},
		{"```go\nx := **y**\n```", "```\nx := **y**\n```"},
		{"```\n# not a heading\n```\n# heading", "```\n# not a heading\n```\n*heading*"},
		{"", ""},
	} {
		if got := ToWhatsApp(tc.in); got != tc.want {
			t.Errorf("ToWhatsApp(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestToWhatsAppGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "reply.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := ToWhatsApp(string(in))
	golden := filepath.Join("testdata", "reply.whatsapp.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("ToWhatsApp(testdata/reply.md) differs from %s:\n%s", golden, got)
	}
}

func TestSplitText(t *testing.T) {
	para := strings.Repeat("word ", 10) // 50 runes
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"fits", "short", 10, []string{"short"}},
		{"paragraphs", "aaaa\n\nbbbb\n\ncccc", 10, []string{"aaaa\n\nbbbb", "cccc"}},
		{"lines", "aaaa\nbbbb\ncccc", 10, []string{"aaaa\nbbbb", "cccc"}},
		{"words", "aaa bbb ccc ddd", 8, []string{"aaa bbb", "ccc ddd"}},
		{"hard", "abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"runes", "ääääää", 4, []string{"ääää", "ää"}},
		{"long paragraph", para + "\n\nend", 52, []string{strings.TrimSpace(para), "end"}},
	} {
		got := splitText(tc.in, tc.max)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: splitText(%q, %d) = %q, want %q", tc.name, tc.in, tc.max, got, tc.want)
		}
	}
}
