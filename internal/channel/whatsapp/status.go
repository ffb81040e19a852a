package whatsapp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// statusFile, in dataDir, holds the running daemon's connection state so
// that `nanoclawd doctor`, a separate process, can show it.
func statusFile(dataDir string) string { return layout.New(dataDir, "").WhatsAppStatus() }

const (
	stateNotStarted   = "not started"
	stateNotPaired    = "not paired"
	stateConnecting   = "connecting"
	stateConnected    = "connected"
	stateDisconnected = "disconnected"
	stateStopped      = "stopped"
	stateLoggedOut    = "logged out"
)

type status struct {
	State  string    `json:"state"`
	Since  time.Time `json:"since"`
	Detail string    `json:"detail,omitempty"` // own JID when connected, else the reason
	PID    int       `json:"pid"`
}

func (s status) String() string {
	since := s.Since.Format(time.RFC3339)
	switch s.State {
	case stateNotPaired:
		return "not paired: run `nanoclawd whatsapp login`"
	case stateConnected:
		return fmt.Sprintf("connected as %s since %s", s.Detail, since)
	case stateNotStarted:
		return s.State
	}
	if s.Detail != "" {
		return fmt.Sprintf("%s since %s: %s", s.State, since, s.Detail)
	}
	return fmt.Sprintf("%s since %s", s.State, since)
}

// Status is a one-line description of the connection for logs and
// `nanoclawd doctor`: "not paired: …", "connected as … since …",
// "disconnected since …: reason", "stopped since …: reason".
func (c *Channel) Status() string {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	return c.status.String()
}

func (c *Channel) state() string {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	return c.status.State
}

// setStatus records a state change, logs it, and writes StatusFile
// (best effort: the file is for humans, the log has the same line).
func (c *Channel) setStatus(state, detail string) {
	c.statusMu.Lock()
	if c.status.State == state && c.status.Detail == detail {
		c.statusMu.Unlock()
		return
	}
	since := c.clock.Now()
	if c.status.State == state {
		since = c.status.Since // same outage, new reason: it still began then
	}
	c.status = status{State: state, Since: since, Detail: detail, PID: os.Getpid()}
	s := c.status
	c.statusMu.Unlock()
	if state == stateNotPaired {
		// The one line an enabled, unpaired WhatsApp gets at each start.
		c.log.Warn().Str("state", state).Msg("WhatsApp " + s.String() + "; nanoclawd runs without it and connects as soon as the pairing is done")
	} else {
		c.log.Info().Str("state", state).Msg("WhatsApp " + s.String())
	}
	if c.opts.DataDir == "" {
		return
	}
	body, _ := json.Marshal(s)
	if err := atomicfile.Write(statusFile(c.opts.DataDir), body, 0o600); err != nil {
		c.log.Debug().Err(err).Msg("write status file")
	}
}

// ReadStatus returns the line the daemon last wrote to StatusFile, and the
// id of the process that wrote it (the caller checks whether it still
// runs). os.ErrNotExist means no daemon has run WhatsApp on this dataDir.
func ReadStatus(dataDir string) (line string, pid int, err error) {
	body, err := os.ReadFile(statusFile(dataDir))
	if err != nil {
		return "", 0, err
	}
	var s status
	if err := json.Unmarshal(body, &s); err != nil {
		return "", 0, fmt.Errorf("%s: %w (delete it; the daemon rewrites it)", statusFile(dataDir), err)
	}
	if s.State == "" {
		return "", 0, errors.New("empty status file")
	}
	return s.String(), s.PID, nil
}

// Outage says since when the channel has been unable to send (zero while
// connected, and before Run starts), and whether that is for good until
// someone pairs again (logged out, or never paired).
func (c *Channel) Outage() (since time.Time, loggedOut bool) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	switch c.status.State {
	case stateConnected, stateNotStarted, "":
		return time.Time{}, false
	case stateLoggedOut, stateNotPaired:
		return c.status.Since, true
	}
	return c.status.Since, false
}

// Connection says whether the channel is connected, and since when it has
// been connected, or down (zero before Run starts).
func (c *Channel) Connection() (connected bool, since time.Time) {
	c.statusMu.Lock()
	defer c.statusMu.Unlock()
	if c.status.State == stateNotStarted {
		return false, time.Time{}
	}
	return c.status.State == stateConnected, c.status.Since
}

// NextRetry is when the reconnect loop tries next after a failure (zero
// before the first one); `nanoclawd status` shows it while disconnected.
func (c *Channel) NextRetry() time.Time {
	if ns := c.retryAt.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}
