package config

import (
	"slices"
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

// A new console.metricsToken applies at the reload (each scrape reads the
// config in force); the address and TLS wait for a restart.
func TestConsoleMetricsTokenReloadsLive(t *testing.T) {
	old, next := Default(), Default()
	next.Console.MetricsToken, next.Console.Listen = "new-token", "127.0.0.1:7000"
	live, restart := Diff(&old, &next)
	if !slices.Equal(live, []string{"console.metricsToken"}) || !slices.Equal(restart, []string{"console.listen"}) {
		t.Errorf("live %v, restart %v", live, restart)
	}
	next.KeepRestartOnly(&old)
	if next.Console.MetricsToken != "new-token" || next.Console.Listen != DefaultConsoleListen {
		t.Errorf("after the reload: token %q, listen %q", next.Console.MetricsToken, next.Console.Listen)
	}
}
