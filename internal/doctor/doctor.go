// Package doctor checks everything a nanoclawd run needs — config, SQLite,
// node, the agent runner and its SDK, the sandbox tools, WhatsApp, a main
// group, API credentials, and `security test` (the sandbox attacked on this
// machine) — and says for each what is there or what to do.
// Each check is a plain function returning one Result; Run lists them in
// the order doctor prints them, so it reads as the report. The channels'
// checks (whatsapp.go, telegram.go) and the model API's (modelapi.go) have
// files of their own.
package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/fit"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/selftest"
	"github.com/nanoclawd/nanoclawd/internal/setup"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// MinNode is the oldest node major version the agent runner supports
// (agent-runner/package.json's engines.node).
const MinNode = 22

// SDKPackage is the Claude Agent SDK's package name.
const SDKPackage = "@anthropic-ai/claude-agent-sdk"

// CredentialVars are the variables the Claude Agent SDK authenticates with.
var CredentialVars = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}

// Result is the outcome of one check.
type Result struct {
	Check  string
	OK     bool
	Detail string   // what was found (OK) or what to do (not OK)
	More   []string // further lines, e.g. one per config problem
	Warn   bool     // OK for a run, but worth the owner's attention (printed WARN)
	// Unchecked: nothing is wrong that could be seen, but the check could
	// not be made (say, the API was out of reach). Not a failure, no ok.
	Unchecked bool
}

// String is "ok   check: detail", "FIX  check: detail" or "--   check:
// detail" (not checked), then More indented; wrapped to fit.Width.
func (r Result) String() string {
	tag := "ok  "
	switch {
	case !r.OK:
		tag = "FIX "
	case r.Warn:
		tag = "WARN"
	case r.Unchecked:
		tag = "--  "
	}
	s := fit.Wrap(tag+" "+r.Check+":", r.Detail, "     ")
	for _, m := range r.More {
		s += "\n" + fit.Wrap("     ", m, "       ")
	}
	return s
}

func ok(check, format string, args ...any) Result {
	return Result{Check: check, OK: true, Detail: fmt.Sprintf(format, args...)}
}

func fix(check, format string, args ...any) Result {
	return Result{Check: check, Detail: fmt.Sprintf(format, args...)}
}

// Env is what the checks learn from the machine; System is the real one.
type Env struct {
	GOOS     string
	LookPath func(string) (string, error)
	Getenv   func(string) string
	Binary   string // this nanoclawd, which the security test confines
}

// System is the environment of this process.
func System() Env {
	bin, _ := os.Executable()
	return Env{GOOS: runtime.GOOS, LookPath: exec.LookPath, Getenv: os.Getenv, Binary: bin}
}

// Run runs every check against the config at configPath, in order.
func Run(ctx context.Context, configPath string, env Env) []Result {
	cfg, res := Config(configPath)
	out := []Result{res}
	if cfg == nil {
		out = append(out, Node(ctx, env, config.NodeBeside()), Sandbox(ctx, env, config.Default().Agent.RunAs.User()))
		for _, c := range []string{"sqlite", "agent runner", "agent sdk", "security test", "whatsapp", "main group", "credentials", "model api"} {
			out = append(out, fix(c, "not checked until the config is valid"))
		}
		return out
	}
	db, res := SQLite(ctx, cfg.DataDir)
	out = append(out, res)
	if db != nil {
		defer db.Close()
	}
	script, res := AgentRunner(env, cfg.Agent.Command)
	sb := Sandbox(ctx, env, cfg.Agent.RunAs.User())
	out = append(out, Node(ctx, env, nodeProgram(cfg.Agent.Command)), res, SDK(script), sb, Confinement(cfg), SecurityTest(ctx, env, cfg, sb.OK))
	pid, daemonRes := Daemon(cfg.DataDir)
	list := registered(ctx, db, cfg.GroupsDir)
	var running *status.Report
	if rep, err := status.Fetch(ctx, cfg.DataDir); err == nil {
		running = &rep
	}
	out = append(out, WhatsApp(ctx, cfg, pid, list), Telegram(ctx, cfg, pid, running), MainGroup(ctx, db, cfg), Credential(ctx, env, cfg, list, running), ModelAPI(ctx, db), daemonRes)
	if env.GOOS == "darwin" {
		out = append(out, Mac(ctx, RealMac(), cfg)...)
	}
	return out
}

// Config loads the config the way the daemon does.
func Config(path string) (*config.Config, Result) {
	cfg, err := config.Load(path)
	var errs config.Errors
	switch {
	case errors.As(err, &errs):
		r := fix("config", "%s has %d problem(s); fix them (nanoclawd config check shows them too):", path, len(errs))
		for _, e := range errs {
			r.More = append(r.More, e.Error())
		}
		return nil, r
	case err != nil:
		return nil, fix("config", "%v", err)
	}
	if _, err := os.Stat(cfg.File); errors.Is(err, fs.ErrNotExist) {
		return cfg, ok("config", "%s does not exist, so every setting is the default (copy the template to change them)", cfg.File)
	}
	return cfg, ok("config", "%s is valid", cfg.File)
}

// SecurityTest runs `nanoclawd security test`: the sandbox built and
// attacked on this machine, so a broken boundary is never an all-clear.
func SecurityTest(ctx context.Context, env Env, cfg *config.Config, sandboxOK bool) Result {
	if !sandboxOK {
		return fix("security test", "not run until the sandbox check passes")
	}
	rep, err := selftest.Run(ctx, selftest.Options{Config: cfg, Binary: env.Binary})
	if err != nil {
		return fix("security test", "could not run, so the sandbox is not proven here: %v", err)
	}
	broken := rep.Broken(nil)
	if len(broken) == 0 {
		return ok("security test", "every boundary holds on this machine (%s)", strings.Join(selftest.Boundaries, ", "))
	}
	r := fix("security test", "%d boundary(ies) of the sandbox do not hold here, so confined groups are not safe: see 'nanoclawd security test'; a newer nanoclawd or kernel, or the operating system's hardening, is the fix", len(broken))
	for _, b := range broken {
		r.More = append(r.More, b.Boundary+": "+b.Detail)
	}
	return r
}

// SQLite opens the database in dataDir (creating it if needed) and proves
// it writable with a write that is rolled back. The caller closes db.
func SQLite(ctx context.Context, dataDir string) (*store.DB, Result) {
	db, err := store.Open(dataDir)
	if err != nil {
		return nil, fix("sqlite", "%v: make %s a writable directory (dataDir in the config)", err, dataDir)
	}
	err = func() error {
		tx, err := db.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		_, err = tx.ExecContext(ctx, `CREATE TABLE doctor_probe (x); INSERT INTO doctor_probe VALUES (1)`)
		return err
	}()
	if err != nil {
		db.Close()
		return nil, fix("sqlite", "%s is not writable: %v (check its owner and permissions, and free disk space)", layout.New(dataDir, "").DB(), err)
	}
	var version int
	db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version)
	return db, ok("sqlite", "%s is writable (schema version %d)", layout.New(dataDir, "").DB(), version)
}

// NodeMajor reads the major version from `node --version` ("v20.11.1").
func NodeMajor(v string) (int, bool) {
	v, found := strings.CutPrefix(v, "v")
	if !found {
		return 0, false
	}
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return n, err == nil
}

// AgentRunner checks that the script agent.command runs exists (for the
// default command, agent-runner/dist/index.js, built by make build). It
// returns the script's path, or "" when the command is a custom program.
func AgentRunner(env Env, command []string) (string, Result) {
	for _, a := range command[1:] {
		if ext := filepath.Ext(a); ext == ".js" || ext == ".mjs" || ext == ".cjs" {
			if _, err := os.Stat(a); err != nil {
				return a, fix("agent runner", "%s (from agent.command; relative paths start at the config's directory) not found: build it with 'make build' in the nanoclawd checkout, or point agent.command at the built one", a)
			}
			return a, ok("agent runner", "%s", a)
		}
	}
	if _, err := env.LookPath(command[0]); err != nil {
		return "", fix("agent runner", "agent.command %q: %s is not an executable program: fix agent.command in the config", command, command[0])
	}
	return "", ok("agent runner", "custom agent.command %q", command)
}

// SDK finds the Claude Agent SDK the runner script imports, the way node
// resolves packages: node_modules in the script's directory or above.
func SDK(script string) Result {
	if script == "" {
		return ok("agent sdk", "not checked: agent.command is a custom program")
	}
	for dir := filepath.Dir(script); ; dir = filepath.Dir(dir) {
		pkg := filepath.Join(dir, "node_modules", SDKPackage, "package.json")
		if body, err := os.ReadFile(pkg); err == nil {
			var meta struct{ Version string }
			if err := json.Unmarshal(body, &meta); err != nil || meta.Version == "" {
				return fix("agent sdk", "%s is unreadable: reinstall with 'cd %s && npm ci'", pkg, dir)
			}
			return ok("agent sdk", "%s %s", SDKPackage, meta.Version)
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	root := filepath.Dir(script)
	if filepath.Base(root) == "dist" {
		root = filepath.Dir(root)
	}
	return fix("agent sdk", "%s is not installed for %s: run 'make build' (or: cd %s && npm ci)", SDKPackage, script, root)
}

// Sandbox checks what confines non-main agents: bubblewrap on Linux (and
// that it can really build a run's sandbox here: user, PID and network
// namespaces), sandbox-exec on macOS. Without it those groups' runs fail
// closed.
func Sandbox(ctx context.Context, env Env, user sandbox.User) Result {
	switch env.GOOS {
	case "darwin":
		if _, err := env.LookPath("sandbox-exec"); err != nil {
			return fix("sandbox", "sandbox-exec not found: it ships with macOS in /usr/bin; put /usr/bin on PATH (non-main groups cannot run without it)")
		}
		r := ok("sandbox", "sandbox-exec (the profile of a group: nanoclawd security show FOLDER)")
		r.More = sandbox.Weaker(env.GOOS) // what it lacks against Linux, one line each
		return r
	case "linux":
	default:
		return fix("sandbox", "nanoclawd has no sandbox on %s: non-main groups cannot run here; use macOS or Linux", env.GOOS)
	}
	bwrap, err := env.LookPath("bwrap")
	if err != nil {
		return fix("sandbox", "bwrap not found: non-main groups cannot run; install it (sudo apt-get install bubblewrap, or run 'make deps' as root)")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd, err := sandbox.ProbeCommand(ctx, bwrap, user)
	if err != nil {
		return fix("sandbox", "%v", err)
	}
	defer func() {
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
	}()
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		said := strings.TrimSpace(stderr.String())
		if i := strings.IndexByte(said, '\n'); i >= 0 {
			said = said[:i]
		}
		if said == "" {
			said = err.Error()
		}
		return fix("sandbox", "bwrap is installed but cannot build an agent's sandbox (%s) as uid %d: allow unprivileged user namespaces (e.g. sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu); --disable-userns needs bubblewrap 0.8 or later", said, user.UID)
	}
	return ok("sandbox", "bwrap (a test sandbox as uid %d, with user, PID and network namespaces, no nested user namespaces and seccomp filter %s started)", user.UID, sandbox.SeccompPolicy)
}

// Confinement says who confined runs are on this machine, what holds
// their kernel surface and memory, and which allowWrite paths they could
// not write.
func Confinement(cfg *config.Config) Result {
	user := cfg.Agent.RunAs.User()
	who := fmt.Sprintf("runs are uid %d gid %d", user.UID, user.GID)
	if !user.Switches() {
		who += " (the daemon's own user: it is not root)"
	}
	r := ok("confinement", "%s; seccomp filter %s; /dev read-only, /dev/shm %d MiB", who, sandbox.SeccompPolicy, cfg.Agent.Limits.ShmMiB)
	if _, err := sandbox.MemoryCgroup(); err != nil {
		// What the daemon measures instead: docs/security.md.
		r.More = append(r.More, fmt.Sprintf("memory: no cgroup limit, so the daemon measures each run (a memfd passed on and closed escapes it): %v", err))
	} else {
		r.More = append(r.More, "memory: cgroup v2 memory controller available to the daemon")
	}
	eff := security.Resolve(cfg.HostSecurity, security.Group{Folder: "doctor"}, cfg.SecurityHost(nil))
	var p sandbox.Plan
	for _, w := range eff.AllowWrite {
		if w != cfg.Layout().Group("doctor") {
			p.Mounts = append(p.Mounts, sandbox.Mount{Path: w, Mode: sandbox.ReadWrite, Why: "allowWrite"})
		}
	}
	for _, bad := range p.Unusable(user) {
		r.OK = false
		r.More = append(r.More, fmt.Sprintf("allowWrite %s: %s", bad.Path, bad.Why))
	}
	return r
}

// registered is the registered groups, none when the database cannot
// tell (MainGroup says why).
func registered(ctx context.Context, db *store.DB, groupsDir string) []groups.Group {
	if db == nil {
		return nil
	}
	list, _ := groups.New(db, groupsDir).List(ctx)
	return list
}

// MainGroup checks that a main group is registered, on a channel that is on.
func MainGroup(ctx context.Context, db *store.DB, cfg *config.Config) Result {
	if db == nil {
		return fix("main group", "not checked: the database cannot be opened (see sqlite)")
	}
	g, err := groups.New(db, cfg.GroupsDir).Main(ctx)
	if errors.Is(err, groups.ErrNotFound) {
		return fix("main group", "none registered: run 'nanoclawd setup' to choose one, or 'nanoclawd groups add --main --jid JID --name NAME --folder main'")
	}
	if err != nil {
		return fix("main group", "%v", err)
	}
	if net := setup.Network(g.JID); !setup.ChannelOn(cfg, g.JID) {
		return fix("main group", "%s (%s) is a %s chat, but that channel is off: set channels.%s.enabled to true in %s", g.Folder, g.JID, net, net, cfg.File)
	}
	return ok("main group", "%s (%s)", g.Folder, g.JID)
}

// Credentials checks that an API credential is set here and passed on to
// agents (agents get only the variables agent.env names), and asks the
// model API (ANTHROPIC_BASE_URL, else the real one) whether it accepts it.
func Credentials(ctx context.Context, env Env, cfg *config.Config) Result {
	var setOnly, listedOnly []string
	for _, name := range CredentialVars {
		set, listed := env.Getenv(name) != "", slices.Contains(cfg.Agent.Env, name)
		switch {
		case set && listed:
			err := setup.Credentials{APIBase: env.Getenv("ANTHROPIC_BASE_URL")}.Check(ctx, name, env.Getenv(name))
			switch {
			case err == nil:
				return ok("credentials", "%s is set, passed to agents (agent.env) and accepted by the API", name)
			case errors.Is(err, setup.ErrRejected):
				return fix("credentials", "%s is set, but %v: put a new key in the environment or in nanoclawd.env beside %s (an OAuth token: 'claude setup-token', as CLAUDE_CODE_OAUTH_TOKEN)", name, err, cfg.File)
			}
			r := ok("credentials", "%s is set and passed to agents (agent.env); %v", name, err)
			r.Unchecked = true
			return r
		case set:
			setOnly = append(setOnly, name)
		case listed:
			listedOnly = append(listedOnly, name)
		}
	}
	switch {
	case len(setOnly) > 0:
		return fix("credentials", "%s is set, but agents only get what agent.env lists: add \"%s\" to agent.env in %s", setOnly[0], setOnly[0], cfg.File)
	case len(listedOnly) > 0:
		return fix("credentials", "agent.env lists %s but it is not set: run 'nanoclawd setup' to paste a key (it keeps it in nanoclawd.env beside %s), or export it before starting nanoclawd", strings.Join(listedOnly, " and "), cfg.File)
	}
	return fix("credentials", "no API credentials: run 'nanoclawd setup' to paste a key, or set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from 'claude setup-token') in nanoclawd.env and add its name to agent.env in %s", cfg.File)
}

// Daemon reports whether a daemon runs on dataDir: the single-instance
// lock file holds its PID. It never takes the lock, so it cannot get in
// the way of a daemon that is starting. Where the kernel lists flocks
// (/proc/locks) it asks who holds the lock, because the PID in a lock left
// by a crashed daemon may belong to another process by now.
func Daemon(dataDir string) (pid int, r Result) {
	lock := layout.New(dataDir, "").Lock()
	body, err := os.ReadFile(lock)
	if err == nil {
		pid, _ = strconv.Atoi(strings.TrimSpace(string(body)))
	}
	if holder, known := flockHolder(lock); known {
		pid = holder
	} else if pid > 0 && !alive(pid) {
		pid = 0
	}
	if pid > 0 {
		return pid, ok("daemon", "running (PID %d, from %s)", pid, lock)
	}
	return 0, ok("daemon", "not running (start it with 'nanoclawd run' or 'nanoclawd service install')")
}

// flockHolder finds in /proc/locks the process holding a flock on path (0
// when nobody does); known is false where /proc/locks cannot tell.
func flockHolder(path string) (pid int, known bool) {
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0, false
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, true // no lock file: nobody holds it
	}
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	if !isUnix {
		return 0, false
	}
	// "3: FLOCK  ADVISORY  WRITE 5657 fe:00:9982131 0 EOF"; waiters have
	// "->" after the number and hold nothing.
	dev := uint64(st.Dev)
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	for _, line := range strings.Split(string(locks), "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == want {
			if n, err := strconv.Atoi(f[4]); err == nil {
				return n, true
			}
		}
	}
	return 0, true
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
