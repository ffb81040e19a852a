package selftest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/confine"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

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
	// Each level made and set 0700 by itself: the daemon's process umask
	// may be narrowed for a moment elsewhere (a socket being made).
	var made []string
	for p := d; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		made = append(made, p)
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := os.Mkdir(made[i], 0o700); err != nil && !os.IsExist(err) {
			return fmt.Errorf("make %s for the test: %w", made[i], err)
		}
		if err := os.Chmod(made[i], 0o700); err != nil {
			return fmt.Errorf("make %s for the test: %w", made[i], err)
		}
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
	c, err := confine.New(confine.Options{Config: cfg, Policy: eff, Spec: spec, SessionDir: l.Session(eff.Group),
		Binary: o.Binary, Upstream: up.url, Reporter: discard{}, Log: zerolog.Nop(), Inside: []string{o.Binary, "sandbox-probe"}})
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
	// As the runner starts a run: as the run's user, the seccomp filter
	// and the rest of the launch's files after the lifeline.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: spec.Credential}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// sandbox-init ends the run when this pipe's other end closes.
	lr, lw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer lw.Close()
	cmd.ExtraFiles = append([]*os.File{lr}, spec.ExtraFiles...)
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
