package config

import (
	"fmt"
	"net"
	"strconv"
)

// Console is the owner's console the daemon serves (internal/console).
type Console struct {
	Enabled bool `json:"enabled" reload:"restart"`
	// Listen is host:port; port 0 takes any free port (tests), which
	// `nanoclawd status` and `nanoclawd console --url` then name.
	Listen string `json:"listen" reload:"restart"`
	// MetricsToken is the bearer token GET /metrics wants; "" = no /metrics.
	// It is read at each scrape, so an edit applies at once.
	MetricsToken string     `json:"metricsToken" secret:"true"`
	TLS          ConsoleTLS `json:"tls" reload:"restart"`
}

// ConsoleTLS is the certificate a console on a non-loopback address
// must serve with: sessions and tokens never cross a network in clear.
type ConsoleTLS struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// DefaultConsoleListen is console.listen's default.
const DefaultConsoleListen = "127.0.0.1:7457"

// Loopback tells whether the console's host is this machine only.
func (c Console) Loopback() bool {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// consoleProblems are the console keys' problems: a listen address that
// does not parse, or one other machines reach without TLS.
func consoleProblems(c Console) []PolicyProblem {
	if !c.Enabled {
		return nil
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
		return []PolicyProblem{{"console.listen", fmt.Sprintf("console.listen %q is not host:port; write it like %q", c.Listen, DefaultConsoleListen)}}
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return []PolicyProblem{{"console.tls", "console.tls needs both cert and key (PEM files), or neither"}}
	}
	if !c.Loopback() && c.TLS.Cert == "" {
		return []PolicyProblem{{"console.listen", fmt.Sprintf("console.listen %q is reachable from other machines (host %q) but console.tls.cert and console.tls.key are not set: "+
			"set both to a PEM certificate and key, or listen on 127.0.0.1", c.Listen, host)}}
	}
	return nil
}
