// Package selftest is `nanoclawd security test`: it proves the
// confinement on the machine it runs on. It builds the sandbox a non-main
// run gets (router.Confine: the same plan, gateway and command line) around
// a probe (`nanoclawd sandbox-probe`, probe.go) that attacks it, against
// canaries it plants and listeners it opens, and reports each boundary as
// held or BROKEN with what was reached. What it planted is removed again.
package selftest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/router"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Boundaries are what the test proves, in the order it reports them.
var Boundaries = []string{"home", "data", "groups", "write", "loopback", "network", "relay", "namespace", "setuid"}

// Pending are boundaries whose kernel side (no nested user namespaces,
// an unprivileged run uid, no setuid files) is built on another branch:
// the daemon reports them but does not yet refuse runs for them.
var Pending = []string{"namespace", "setuid"} // until i22-kernel merges

// Result is one boundary's verdict.
type Result struct {
	Boundary string `json:"boundary"`
	Status   string `json:"status"` // "held" or "BROKEN"
	Detail   string `json:"detail"`
}

// Held tells whether the boundary held.
func (r Result) Held() bool { return r.Status == "held" }

// Report is the whole verdict.
type Report struct {
	OS         string   `json:"os"`
	OK         bool     `json:"ok"`
	Boundaries []Result `json:"boundaries"`
}

// Broken lists the boundaries that did not hold, but those in except.
func (r Report) Broken(except []string) []Result {
	var out []Result
	for _, b := range r.Boundaries {
		if !b.Held() && !slices.Contains(except, b.Boundary) {
			out = append(out, b)
		}
	}
	return out
}

// Options say where to test.
type Options struct {
	Config *config.Config
	Binary string // this nanoclawd: sandbox-init and the probe
	Home   string // the owner's home ("" = this user's)
	// Weaken loosens the policy for one boundary, the way an operator
	// could, so that a test sees the report name it (WeakenEnv).
	Weaken string
	Log    zerolog.Logger
}

// WeakenEnv, set to a boundary's name, makes `security test` loosen that
// boundary (home, data, groups, write, loopback or network): a way to see
// it report a broken one.
const WeakenEnv = "NANOCLAWD_SECURITY_TEST_WEAKEN"

// Run proves the confinement and cleans up after itself. An error means
// the test itself could not be made (no sandbox here, the probe did not
// run): nothing is proven then.
func Run(ctx context.Context, o Options) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cfg := o.Config
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	id := randID()
	secret := "nanoclawd-canary-" + id
	l := cfg.Layout()
	s := &scene{secret: secret}
	defer s.cleanup()

	// The run's own group, and another group with notes of its own.
	probe, other := "selftest-"+id, "selftest-other-"+id
	for _, d := range []string{l.Group(probe), l.Session(probe), string(l.IPC(probe)), l.Group(other)} {
		if err := s.mkdir(d); err != nil {
			return Report{}, err
		}
	}
	canaries := map[string]string{
		"home":   filepath.Join(o.Home, ".nanoclawd-selftest-"+id),
		"data":   filepath.Join(cfg.DataDir, "selftest-"+id),
		"groups": filepath.Join(l.Group(other), "notes.md"),
	}
	for _, p := range canaries {
		if err := s.plant(p); err != nil {
			return Report{}, err
		}
	}
	writes := []string{filepath.Join(cfg.DataDir, "selftest-write-"+id), filepath.Join(o.Home, ".nanoclawd-selftest-write-"+id),
		filepath.Join(l.Group(other), "written-"+id), filepath.Join(filepath.Dir(cfg.File), ".nanoclawd-selftest-write-"+id)}
	for _, p := range writes {
		s.remove = append(s.remove, p)
	}
	setuidFile := filepath.Join(l.Group(probe), "setuid-"+id)

	// What the network probes aim at: a listener on the host's loopback,
	// one on an address of the host that is not loopback (offline it
	// stands in for the network beyond), and the model API's stand-in.
	loop, err := s.listen("127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	var lan *listener
	if a := hostAddr(); a != "" {
		if lan, err = s.listen(net.JoinHostPort(a, "0")); err != nil {
			return Report{}, err
		}
	}
	up, err := s.upstream()
	if err != nil {
		return Report{}, err
	}

	// The policy: the global one, with "*" as the network (the widest an
	// operator writes), as for a group without an override, and a name
	// allowed on the loopback listener's port: the gateway must refuse it
	// for where it leads.
	_, loopPort, _ := net.SplitHostPort(loop.addr)
	global := cfg.HostSecurity
	global.Network = &security.Network{AllowedDomains: []string{"*", "localhost:" + loopPort}}
	folders := []string{probe, other}
	switch o.Weaken {
	case "":
	case "home":
		global.AllowRead = append(slices.Clone(global.AllowRead), o.Home)
	case "data":
		global.AllowRead = append(slices.Clone(global.AllowRead), cfg.DataDir)
	case "groups":
		folders = []string{probe} // as if the other group were not registered
		global.AllowRead = append(slices.Clone(global.AllowRead), l.Group(other))
	case "write":
		global.AllowWrite = append(slices.Clone(global.AllowWrite), cfg.DataDir)
	case "loopback":
		global.Network.AllowedDomains = append(global.Network.AllowedDomains, loop.addr)
	case "network":
		if lan == nil {
			return Report{}, errors.New("no address of this host besides loopback to weaken the network boundary with")
		}
		global.Network.AllowedDomains = append(global.Network.AllowedDomains, lan.addr)
	default:
		return Report{}, fmt.Errorf("%s=%q: weaken one of home, data, groups, write, loopback, network", WeakenEnv, o.Weaken)
	}
	eff := security.Resolve(global, security.Group{Folder: probe}, cfg.SecurityHost(folders))

	task := Task{Secret: secret, Read: []string{canaries["home"], canaries["data"], canaries["groups"]}, Write: writes,
		Dial: []string{loop.addr}, Tunnel: []string{loop.addr, "localhost:" + loopPort}, Get: []string{"http://" + loop.addr + "/", "http://localhost:" + loopPort + "/"},
		Relay:  []string{"POST /v1/messages?beta=true", "GET /v1/files", "DELETE /v1/files/file_x", "POST /v1/messages/batches", "GET /v1/models"},
		Setuid: setuidFile}
	if lan != nil {
		task.Dial = append(task.Dial, lan.addr)
		task.Tunnel = append(task.Tunnel, lan.addr)
		task.Get = append(task.Get, "http://"+lan.addr+"/")
	}
	found, err := s.probe(ctx, o, cfg, eff, up, task)
	if err != nil {
		return Report{}, err
	}
	rep := Report{OS: runtime.GOOS, OK: true}
	verdict := func(name, broken string) {
		r := Result{Boundary: name, Status: "held"}
		if broken != "" {
			r.Status, r.Detail = "BROKEN", broken
			rep.OK = false
		}
		rep.Boundaries = append(rep.Boundaries, r)
	}
	for _, name := range []string{"home", "data", "groups"} {
		verdict(name, reachedOf(found, "read", canaries[name], "read "+canaries[name]))
	}
	var wrote []string
	for _, p := range writes {
		if _, err := os.Lstat(p); err == nil {
			wrote = append(wrote, p)
		}
	}
	verdict("write", joinIf("wrote ", wrote))
	verdict("loopback", s.network(found, loop, "the host's loopback"))
	beyond := ""
	if lan != nil {
		beyond = s.network(found, lan, "an address of the host")
	}
	if runtime.GOOS == "linux" { // macOS runs share the host's interfaces; the profile is the boundary there
		if f := find(found, "interfaces", ""); f != nil && f.Reached {
			beyond = strings.TrimPrefix(beyond+"; the run has network interfaces: "+f.Detail, "; ")
		}
	}
	verdict("network", beyond)
	verdict("relay", up.verdict(found))
	verdict("namespace", reachedOf(found, "namespace", "", ""))
	verdict("setuid", setuidVerdict(setuidFile, found))
	return rep, nil
}

// scene is what one test planted, to be removed again.
type scene struct {
	secret    string
	remove    []string // files and directories, removed last first
	listeners []*listener
	server    *http.Server
}

func (s *scene) mkdir(d string) error {
	if _, err := os.Lstat(d); err == nil {
		return fmt.Errorf("%s exists already: not testing over it", d)
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return fmt.Errorf("make %s for the test: %w", d, err)
	}
	s.remove = append(s.remove, d)
	return nil
}

func (s *scene) plant(p string) error {
	if err := os.WriteFile(p, []byte(s.secret+"\n"), 0o600); err != nil {
		return fmt.Errorf("plant a canary at %s: %w", p, err)
	}
	s.remove = append(s.remove, p)
	return nil
}

func (s *scene) cleanup() {
	for _, l := range s.listeners {
		l.ln.Close()
	}
	if s.server != nil {
		s.server.Close()
	}
	for i := len(s.remove) - 1; i >= 0; i-- {
		os.RemoveAll(s.remove[i])
	}
}

// listener is a TCP listener that answers like a web server and counts
// who came.
type listener struct {
	ln   net.Listener
	addr string
	mu   sync.Mutex
	hits int
}

func (s *scene) listen(addr string) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s for the test: %w", addr, err)
	}
	l := &listener{ln: ln, addr: ln.Addr().String()}
	s.listeners = append(s.listeners, l)
	body := s.secret + "\n"
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			l.hits++
			l.mu.Unlock()
			fmt.Fprintf(c, "HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			c.Close()
		}
	}()
	return l, nil
}

func (l *listener) count() int { l.mu.Lock(); defer l.mu.Unlock(); return l.hits }

// network is the verdict on one listener: whoever came, and how.
func (s *scene) network(found []Finding, l *listener, what string) string {
	var how []string
	_, port, _ := net.SplitHostPort(l.addr)
	for _, f := range found {
		if f.Reached && (strings.Contains(f.Target, l.addr) || strings.Contains(f.Target, "localhost:"+port)) {
			how = append(how, f.Probe+" "+f.Target)
		}
	}
	if n := l.count(); n > 0 || len(how) > 0 {
		return fmt.Sprintf("%s (%s) took %d connection(s) from the run: %s", what, l.addr, n, strings.Join(how, ", "))
	}
	return ""
}

// upstream stands in for the model API and records what reached it.
type upstream struct {
	url  string
	mu   sync.Mutex
	seen []string
}

func (s *scene) upstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the model API's stand-in: %w", err)
	}
	u := &upstream{url: "http://" + ln.Addr().String()}
	s.server = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Method+" "+r.URL.Path)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"type":"message","content":[]}`))
	})}
	go s.server.Serve(ln)
	return u, nil
}

// verdict: the relay held if the model request went through and nothing else did.
func (u *upstream) verdict(found []Finding) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var other []string
	model := false
	for _, s := range u.seen {
		if s == "POST /v1/messages" {
			model = true
		} else {
			other = append(other, s)
		}
	}
	if len(other) > 0 {
		return "the model API received " + strings.Join(other, ", ") + " with the real credential"
	}
	if !model {
		detail := ""
		if f := find(found, "relay", "POST /v1/messages?beta=true"); f != nil {
			detail = ": " + f.Detail
		}
		return "the relay did not pass the probe's model request, so its refusals prove nothing" + detail
	}
	return ""
}

// probe runs the probe in the confinement a non-main run gets, and reads
// its findings.
func (s *scene) probe(ctx context.Context, o Options, cfg *config.Config, eff security.Effective, up *upstream, task Task) ([]Finding, error) {
	l := cfg.Layout()
	spec := &runner.Spec{Command: cfg.Agent.Command, Dir: l.Group(eff.Group), IPCDir: string(l.IPC(eff.Group)),
		Env: map[string]string{"PATH": os.Getenv("PATH"), "ANTHROPIC_API_KEY": "selftest-real-key-" + s.secret}}
	c, err := router.Confine(ctx, router.Confinement{Config: cfg, Policy: eff, Spec: spec, SessionDir: l.Session(eff.Group),
		Binary: o.Binary, Upstream: up.url, Reporter: discard{}, Log: o.Log, Inside: []string{o.Binary, "sandbox-probe"}})
	if err != nil {
		return nil, fmt.Errorf("build the sandbox: %w", err)
	}
	defer c.Close()
	in, _ := json.Marshal(task)
	cmd := exec.CommandContext(ctx, spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// sandbox-init ends the run when this pipe's other end closes.
	lr, lw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer lw.Close()
	cmd.ExtraFiles = []*os.File{lr}
	err = cmd.Run()
	lr.Close()
	var found []Finding
	if jerr := json.Unmarshal(stdout.Bytes(), &found); jerr != nil || len(found) == 0 {
		return nil, fmt.Errorf("the probe did not report (%v): %s", err, strings.TrimSpace(stderr.String()))
	}
	return found, nil
}

// discard keeps the test's refusals out of the audit trail and the alerts.
type discard struct{}

func (discard) Report(context.Context, security.Violation) error { return nil }

func find(found []Finding, probe, target string) *Finding {
	for i := range found {
		if found[i].Probe == probe && (target == "" || found[i].Target == target) {
			return &found[i]
		}
	}
	return nil
}

// reachedOf is what (if anything) a probe reached.
func reachedOf(found []Finding, probe, target, what string) string {
	f := find(found, probe, target)
	switch {
	case f == nil:
		return "the probe did not try " + probe + ", so nothing is proven"
	case !f.Reached:
		return ""
	case what == "":
		return f.Detail
	}
	return what + ": " + f.Detail
}

func setuidVerdict(path string, found []Finding) string {
	fi, err := os.Lstat(path)
	if err != nil {
		if f := find(found, "setuid", path); f != nil {
			return "" // the run could not even make the file
		}
		return "the probe did not try setuid, so nothing is proven"
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) == 0 {
		return ""
	}
	owner := ""
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		owner = fmt.Sprintf(", owned by uid %d on the host", st.Uid)
	}
	return fmt.Sprintf("a file the run made keeps its set-id bits (%s%s)", fi.Mode(), owner)
}

func joinIf(prefix string, list []string) string {
	if len(list) == 0 {
		return ""
	}
	return prefix + strings.Join(list, ", ")
}

// hostAddr is an address of this host that is not loopback (IPv4 first).
func hostAddr() string {
	addrs, _ := net.InterfaceAddrs()
	var v6 string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() {
			continue
		}
		if n.IP.To4() != nil {
			return n.IP.String()
		}
		if v6 == "" {
			v6 = n.IP.String()
		}
	}
	return v6
}

func randID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}
