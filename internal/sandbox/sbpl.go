package sandbox

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
)

// macSystem is the read-only runtime of a macOS run. /usr/local is cut
// back out of /usr below: there, as in /opt/homebrew, only what the
// agent command's runtime needs is allowed (homebrewRuntime).
var macSystem = []string{
	"/usr", "/bin", "/sbin", "/System", "/Library/Apple",
	"/private/etc/hosts", "/private/etc/passwd", "/private/etc/group", "/private/etc/localtime",
	"/private/etc/ssl", "/private/var/db/timezone",
}

// homebrewPrefixes are where Homebrew installs (Apple silicon, Intel).
var homebrewPrefixes = []string{"/opt/homebrew", "/usr/local"}

// macDevices are the only device nodes a run may open: the bit buckets
// and randomness every runtime uses, dtrace's helper (node and the JIT of
// other runtimes open it at start and carry on without it only after an
// error line), and the process's own standard streams and descriptors. No
// terminal: /dev/tty* would reach the owner's sessions.
var macDevices = []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/dtracehelper",
	"/dev/stdin", "/dev/stdout", "/dev/stderr"}

// Profile is the Seatbelt (sandbox-exec) profile of p: deny by default,
// the same allow-list as on Linux. Seatbelt applies the last matching
// rule, so the cut-outs come after what they cut from. It cannot make a
// network namespace: the run may reach its own gateway port on loopback
// (p.Listen, where sandbox-init serves the gateway) and the gateway
// socket, nothing else. docs/security.md gives the reason for each rule.
func Profile(p Plan) string {
	p.Mounts = withPrivate(p.Mounts)
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
	w("(allow file-read-metadata (literal \"/\") (literal \"/private\") (literal \"/var\") (literal \"/etc\") (literal \"/tmp\") (literal \"/dev\"))")
	// A runtime resolving a path (realpath) looks at each directory above
	// it: their metadata, never their listing.
	// rule is one rule over several paths: head, then (kind "path") for
	// each, then tail.
	rule := func(head, kind string, paths []string, tail string) {
		b.WriteString(head)
		for _, path := range paths {
			fmt.Fprintf(&b, " (%s %s)", kind, q(path))
		}
		b.WriteString(tail + "\n")
	}
	if up := ancestors(p.Mounts); len(up) > 0 {
		rule("(allow file-read-metadata", "literal", up, ")")
	}
	rule("(allow file-read* file-write-data", "literal", macDevices, " (regex #\"^/dev/fd/[0-9]+$\"))")
	rule("(allow file-read*", "subpath", macSystem, ")")
	rule("(deny file-read*", "subpath", homebrewPrefixes, ") ; Homebrew and /usr/local: only the agent runtime's own parts")
	for _, r := range homebrewRuntime(p) {
		w("(allow file-read* (%s %s)) ; the agent command's runtime (Homebrew)", r.kind, q(r.path))
	}
	// The mounts in the plan's order, which is bubblewrap's: a later one
	// covers an earlier one, as the last matching rule wins here (a
	// writable folder inside a read-only home, a cut-out inside that
	// folder). Linux's system runtime is not granted: macSystem is the
	// Mac's, and its /usr would open /usr/local again.
	for _, m := range p.Mounts {
		switch {
		case m.Why == whySystem:
		case m.Mode == ReadOnly:
			w("(allow file-read* (%s %s)) ; %s", pathKind(m), q(m.Path), m.Why)
			// Also what does not exist yet, or lies in a writable dir.
			w("(deny file-write* (%s %s))", pathKind(m), q(m.Path))
		case m.Mode == ReadWrite:
			w("(allow file-read* file-write* (%s %s)) ; %s", pathKind(m), q(m.Path), m.Why)
		case m.Mode == Hidden:
			w("(deny file-read* file-write* (%s %s)) ; %s", pathKind(m), q(m.Path), m.Why)
		case m.Mode == Private:
			w("; no shared /tmp: TMPDIR is the run's own, inside its session directory")
		}
	}
	for _, dir := range withPrivatePath(p.Workdir) {
		w("(deny file-write* (regex #\"^%s/(.*/)?\\.git(/|$)\")) ; no repository anywhere in the group's folder: git run by the owner there must not run what the group wrote", sbplRegexQuote(dir))
	}
	w("(deny file-write-setugid) ; no file the run makes keeps a setuid or setgid bit")
	if _, port, err := net.SplitHostPort(p.Listen); err == nil && port != "0" {
		w("(allow network-bind network-inbound (local ip \"localhost:%s\")) ; sandbox-init offers the gateway here", port)
		w("(allow network-outbound (remote ip \"localhost:%s\")) ; the gateway, and nothing else on this host", port)
	}
	for _, sock := range withPrivatePath(p.Socket) {
		w("(allow network-outbound (remote unix-socket (path-literal %s))) ; the egress gateway", q(sock))
	}
	return b.String()
}

// macLinks are macOS's own symbolic links into /private. Seatbelt matches
// the path a file really has, so a rule over /var/folders/… (where TMPDIR
// and so every test's directories are) also names /private/var/folders/….
// Only these fixed links are followed: a link a group planted never widens
// its profile.
var macLinks = []string{"/var", "/tmp", "/etc"}

// withPrivatePath is path, and its real path when it goes through one of
// macLinks ("" gives nothing).
func withPrivatePath(path string) []string {
	if path == "" {
		return nil
	}
	if under(path, macLinks) {
		return []string{path, "/private" + path}
	}
	return []string{path}
}

// withPrivate follows each mount through one of macLinks with the same
// mount at its real path, in the same place of the order.
func withPrivate(ms []Mount) []Mount {
	var out []Mount
	for _, m := range ms {
		if m.Mode == Private {
			out = append(out, m) // the run's own /tmp holds nothing of the host's
			continue
		}
		for _, path := range withPrivatePath(m.Path) {
			m.Path = path
			out = append(out, m)
		}
	}
	return out
}

func pathKind(m Mount) string {
	if m.Dir {
		return "subpath"
	}
	return "literal"
}

// sbplRegexQuote escapes a path for a Seatbelt regex inside #"...".
func sbplRegexQuote(s string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(s), `"`, `\"`)
}

// ancestors are the directories above the visible mounts, "/" excluded.
func ancestors(ms []Mount) []string {
	var out []string
	for _, m := range ms {
		if m.Mode != ReadOnly && m.Mode != ReadWrite {
			continue
		}
		for d := filepath.Dir(m.Path); d != "/" && d != "."; d = filepath.Dir(d) {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

type sbplPath struct{ kind, path string }

// homebrewRuntime is what of a Homebrew prefix the agent command needs:
// for each program or argument of agent.command that lives in a formula's
// keg (<prefix>/Cellar/<formula>/<version>/…, where the plan found it by
// its real path), that formula's keg and its opt link, and the same for
// every runtime dependency its INSTALL_RECEIPT.json names (the libraries
// it loads through <prefix>/opt/<dep>/lib). Never var/ or etc/.
func homebrewRuntime(p Plan) []sbplPath {
	var out []sbplPath
	seen := map[string]bool{}
	var add func(prefix, formula string)
	add = func(prefix, formula string) {
		if formula == "" || strings.ContainsAny(formula, "/\x00") || seen[prefix+"|"+formula] {
			return
		}
		seen[prefix+"|"+formula] = true
		out = append(out, sbplPath{"subpath", filepath.Join(prefix, "Cellar", formula)},
			sbplPath{"literal", filepath.Join(prefix, "opt", formula)})
		for _, dep := range runtimeDeps(filepath.Join(prefix, "Cellar", formula)) {
			add(prefix, dep)
		}
	}
	for _, m := range p.Mounts {
		if m.Why != "agent.command" {
			continue
		}
		for _, prefix := range homebrewPrefixes {
			rest, ok := strings.CutPrefix(m.Path, prefix+"/Cellar/")
			if !ok {
				continue
			}
			formula, _, _ := strings.Cut(rest, "/")
			add(prefix, formula)
		}
	}
	return out
}

// runtimeDeps reads the runtime dependencies of every installed version
// of a formula from its install receipts.
func runtimeDeps(keg string) []string {
	receipts, _ := filepath.Glob(filepath.Join(keg, "*", "INSTALL_RECEIPT.json"))
	var out []string
	for _, r := range receipts {
		data, err := os.ReadFile(r)
		if err != nil {
			continue
		}
		var rec struct {
			Deps []struct {
				FullName string `json:"full_name"`
			} `json:"runtime_dependencies"`
		}
		if json.Unmarshal(data, &rec) != nil {
			continue
		}
		for _, d := range rec.Deps {
			// A tap's formula is "owner/tap/name"; its keg is Cellar/name.
			name := d.FullName[strings.LastIndex(d.FullName, "/")+1:]
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// Listen is where a new run's gateway is offered inside it: GatewayAddr
// in the run's own network namespace on Linux; on macOS, which has none, a
// free loopback port of the run's own (set it as Plan.Listen, then make
// the Profile again).
func Listen() string {
	if runtime.GOOS == "darwin" {
		return freeLoopback()
	}
	return GatewayAddr
}

// freeLoopback is a loopback address with a port nothing listens on now,
// for a macOS run's gateway (its profile allows that port only).
func freeLoopback() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return GatewayAddr
	}
	defer ln.Close()
	return ln.Addr().String()
}
