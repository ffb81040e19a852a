package telegram

import (
	"strings"
	"testing"
)

func TestToHTML(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain & <simple> \"text\"", "plain &amp; &lt;simple&gt; &#34;text&#34;"},
		{"**bold** and *it* and ~~gone~~", "<b>bold</b> and <i>it</i> and <s>gone</s>"},
		{"__bold__ ***both***", "<b>bold</b> <b><i>both</i></b>"},
		{"a `x < y && *z*` b", "a <code>x &lt; y &amp;&amp; *z*</code> b"},
		{"see [the docs](https://example.com/?a=1&b=2)", `see <a href="https://example.com/?a=1&amp;b=2">the docs</a>`},
		{"## Title <1>", "<b>Title &lt;1&gt;</b>"},
		{"* one\n- two", "• one\n• two"},
		{"globs **/*.pem stay", "globs **/*.pem stay"},
		{"```go\nif a < b {}\n```\nafter", "<pre><code class=\"language-go\">if a &lt; b {}</code></pre>\nafter"},
		{"```\nraw **not bold**\n```", "<pre>raw **not bold**</pre>"},
		{"nul \x00 byte", "nul  byte"},
		{"*a* *b* x*y*z", "<i>a</i> <i>b</i> x*y*z"},
	} {
		if got := ToHTML(tc.in); got != tc.want {
			t.Errorf("ToHTML(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSplitText(t *testing.T) {
	if got := splitText("short", maxText); len(got) != 1 || got[0] != "short" {
		t.Errorf("short text: %q", got)
	}
	para := strings.Repeat("word ", 500) // 2500 characters
	parts := splitText(para+"\n\n"+para+"\n\n"+para, maxText)
	if len(parts) != 3 {
		t.Fatalf("three paragraphs of 2500 characters make %d parts, want 3 (cut between paragraphs)", len(parts))
	}
	for _, p := range parts {
		if width(p) > maxText {
			t.Errorf("a part is %d wide, over %d", width(p), maxText)
		}
	}
	// Emoji count twice (UTF-16), as Telegram counts them.
	emoji := strings.Repeat("😀", 3000)
	parts = splitText(emoji, maxText)
	if len(parts) != 2 || width(parts[0]) != 4096 || strings.Join(parts, "") != emoji {
		t.Errorf("6000 UTF-16 units of emoji: %d parts, first %d wide", len(parts), width(parts[0]))
	}
}
