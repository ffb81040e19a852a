package runner

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Spec describes one agent run.
type Spec struct {
	Command []string          // argv; Command[0] is looked up in the daemon's PATH
	Dir     string            // cwd: the group's folder
	Env     map[string]string // NANOCLAW_* and the agent.env pass-through; PATH and HOME are added unless given
	Input   protocol.ContainerInput
	IPCDir  string // <dataDir>/ipc/<folder> (layout.IPCDir); its input/ is cleared before the start
	LogDir  string // <groupsDir>/<folder>/logs; the run log goes here
	// Reporter records a link the group put in place of input/ or logs/
	// (removed, never followed); nil records nothing.
	Reporter security.Reporter

	Timeout     time.Duration // hard limit of one turn (from the start, then from each result frame); 0 = none
	IdleTimeout time.Duration // no output for this long → _close; 0 = none
	KillGrace   time.Duration // SIGTERM → SIGKILL; 0 = DefaultKillGrace
	CloseGrace  time.Duration // after the idle _close, time to exit before SIGTERM (the hard limit still holds); 0 = DefaultCloseGrace
	MaxLine     int           // longest frame or log line kept; 0 = DefaultMaxLine
	MaxLogBytes int64         // log file cap; 0 = DefaultMaxLogBytes

	// Prompted, for an agent started ahead of its first prompt
	// (Input.Standby), is closed when that prompt is handed to it: Timeout
	// and IdleTimeout start then. Until then neither applies; the caller
	// bounds how long it waits (agent.warmFor).
	Prompted <-chan struct{}

	// Closing, when closed, makes the runner write <ipc>/input/_close so the
	// agent finishes what it is doing and exits (Queue's Job.Closing fits here).
	Closing <-chan struct{}

	// Lifeline passes the agent the read end of a pipe as fd 3, whose
	// write end only this daemon holds: EOF there means the run is over —
	// the runner ended it (in place of SIGTERM), or the daemon is gone (a
	// kill -9 included). Pdeathsig cannot say so through bubblewrap,
	// which clears it when it changes its credentials.
	Lifeline bool
	// ExtraFiles are handed to the agent after the lifeline, from fd 4 on
	// (the sandbox's seccomp filter).
	ExtraFiles []*os.File
	// Credential starts the agent as another host user (nil: the daemon's).
	Credential *syscall.Credential
	// CgroupFD, when > 0, is a cgroup directory the agent starts inside
	// (Linux: its memory limit holds from the first instruction).
	CgroupFD int
}

func (s *Spec) defaults() {
	if s.CloseGrace <= 0 {
		s.CloseGrace = DefaultCloseGrace
	}
	if s.KillGrace <= 0 {
		s.KillGrace = DefaultKillGrace
	}
	if s.MaxLine <= 0 {
		s.MaxLine = DefaultMaxLine
	}
	if s.MaxLogBytes <= 0 {
		s.MaxLogBytes = DefaultMaxLogBytes
	}
}

func (s *Spec) check() error {
	switch {
	case len(s.Command) == 0 || s.Command[0] == "":
		return fmt.Errorf("%w: empty command (set agent.command)", ErrBadSpec)
	case s.Dir == "":
		return fmt.Errorf("%w: no working directory for group %q", ErrBadSpec, s.Input.GroupFolder)
	case s.IPCDir == "":
		return fmt.Errorf("%w: no IPC directory for group %q", ErrBadSpec, s.Input.GroupFolder)
	case s.LogDir == "":
		return fmt.Errorf("%w: no log directory for group %q", ErrBadSpec, s.Input.GroupFolder)
	}
	if fi, err := os.Stat(s.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: group folder %s is not a directory (create it or re-add the group)", ErrBadSpec, s.Dir)
	}
	return nil
}

// buildEnv makes the agent's environment from nothing: PATH and HOME from
// the daemon, then extra (which may override them).
func buildEnv(extra map[string]string) ([]string, error) {
	m := map[string]string{}
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return nil, fmt.Errorf("%w: environment variable %q: names must be non-empty without '=' and values without NUL", ErrBadSpec, k)
		}
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env, nil
}
