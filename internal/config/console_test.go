package config

import (
	"strings"
	"testing"
)

// A console other machines reach without TLS is refused in one line that
// names the key and the fix; loopback and TLS are fine.
func TestConsoleListen(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{}`, ""},
		{`{"console": {"listen": "127.0.0.1:0"}}`, ""},
		{`{"console": {"listen": "[::1]:7457"}}`, ""},
		{`{"console": {"listen": "localhost:7457"}}`, ""},
		{`{"console": {"listen": "0.0.0.0:7457"}}`, "console.listen \"0.0.0.0:7457\" is reachable from other machines"},
		{`{"console": {"listen": "192.168.1.5:7457", "tls": {"cert": "c.pem", "key": "k.pem"}}}`, ""},
		{`{"console": {"listen": "0.0.0.0:7457", "enabled": false}}`, ""},
		{`{"console": {"listen": "7457"}}`, "is not host:port"},
		{`{"console": {"listen": "127.0.0.1:1", "tls": {"cert": "c.pem"}}}`, "needs both cert and key"},
	} {
		_, err := Parse("/x/nanoclaw.config.jsonc", []byte(c.src))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.src, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.src, err, c.want)
		case c.want != "" && strings.Count(err.Error(), "\n") > 0:
			t.Errorf("%s: want one line, got %q", c.src, err)
		}
	}
}
