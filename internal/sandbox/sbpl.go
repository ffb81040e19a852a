package sandbox

import (
	"fmt"
	"strings"
)

// macSystem is the read-only runtime of a macOS run.
var macSystem = []string{
	"/usr", "/bin", "/sbin", "/System", "/Library/Apple", "/opt/homebrew", "/usr/local",
	"/private/etc/hosts", "/private/etc/passwd", "/private/etc/group", "/private/etc/localtime",
	"/private/etc/ssl", "/private/var/db/timezone", "/dev",
}

// Profile is the Seatbelt (sandbox-exec) profile of p: deny by default,
// the same allow-list as on Linux. Seatbelt applies the last matching
// rule, so the cut-outs come after what they cut from. It cannot make a
// network namespace: the run may reach loopback and the gateway socket
// only, and sandbox-init offers the gateway on a port of its own.
func Profile(p Plan) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	q := func(s string) string { return fmt.Sprintf("%q", s) }
	w("(version 1)")
	w("(deny default)")
	w("(allow process-fork process-exec)")
	w("(allow signal (target same-sandbox))")
	w("(allow sysctl-read)")
	w("(allow ipc-posix-shm* ipc-posix-sem)")
	w("(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\") (global-name \"com.apple.system.notification_center\") (global-name \"com.apple.trustd.agent\") (global-name \"com.apple.system.logger\"))")
	w("(allow file-read-metadata (literal \"/\") (literal \"/private\") (literal \"/var\") (literal \"/etc\") (literal \"/tmp\"))")
	w("(allow file-read* file-write* (literal \"/dev/null\") (literal \"/dev/zero\") (literal \"/dev/tty\") (literal \"/dev/dtracehelper\"))")
	w("(allow file-read* (literal \"/dev/random\") (literal \"/dev/urandom\"))")
	b.WriteString("(allow file-read*")
	for _, s := range macSystem {
		fmt.Fprintf(&b, " (subpath %s)", q(s))
	}
	b.WriteString(")\n")
	for _, m := range p.Mounts {
		switch m.Mode {
		case ReadOnly:
			w("(allow file-read* (%s %s)) ; %s", pathKind(m), q(m.Path), m.Why)
		case ReadWrite:
			w("(allow file-read* file-write* (%s %s)) ; %s", pathKind(m), q(m.Path), m.Why)
		case Private:
			w("; no shared /tmp: TMPDIR is the run's own, inside its session directory")
		}
	}
	for _, m := range p.Mounts {
		switch {
		case m.Mode == Hidden:
			w("(deny file-read* file-write* (%s %s)) ; %s", pathKind(m), q(m.Path), m.Why)
		case m.Mode == ReadOnly:
			// Also what lies inside a writable dir, or does not exist yet.
			w("(deny file-write* (%s %s))", pathKind(m), q(m.Path))
		}
	}
	w("(allow network-bind network-inbound (local ip \"localhost:*\"))")
	w("(allow network-outbound (remote ip \"localhost:*\"))")
	if p.Socket != "" {
		w("(allow network-outbound (remote unix-socket (path-literal %s))) ; the egress gateway", q(p.Socket))
	}
	return b.String()
}

func pathKind(m Mount) string {
	if m.Dir {
		return "subpath"
	}
	return "literal"
}
