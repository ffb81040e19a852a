// Package status is what `nanoclawd status` shows: the report of a
// running daemon, built from its parts (Build), the control socket it is
// served on (always there, whatever channels are enabled), the client that
// asks for it, and the text rendering of it.
package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// SocketPath is the control socket of the daemon on dataDir.
func SocketPath(dataDir string) string { return layout.New(dataDir, "").ControlSocket() }

// ErrNotRunning: nothing answers on the control socket.
var ErrNotRunning = errors.New("no nanoclawd daemon is running")

// Report is the daemon's view of itself at one moment.
type Report struct {
	PID            int             `json:"pid"`
	Started        time.Time       `json:"started"`
	Time           time.Time       `json:"time"`
	ConfigFile     string          `json:"configFile"`
	Channels       []Channel       `json:"channels"`
	Agents         Agents          `json:"agents"`
	Groups         []Group         `json:"groups"`
	Outbox         []Backlog       `json:"outbox"`
	NextTasks      []Task          `json:"nextTasks"`
	Violations24h  []Violations    `json:"violations24h"`
	ModelAPI       []usage.Health  `json:"modelApi"`       // standing problems: a refused credential, a rate limit
	Credential     Credential      `json:"credential"`     // the model credential agents get now
	Config         json.RawMessage `json:"config"`         // the config in force, its secrets masked (config.Masked)
	PendingRestart []string        `json:"pendingRestart"` // keys edited in the file that apply only after a restart
	// Backup is the last backup's outcome (nil: none recorded yet) and
	// when the next scheduled one is due (nil: none scheduled).
	LastBackup *backup.Last `json:"lastBackup,omitempty"`
	NextBackup *time.Time   `json:"nextBackup,omitempty"`
	// Console is the owner's console (nil: console.enabled is false).
	Console *Console `json:"console,omitempty"`
	// DatabaseBytes is the size of nanoclaw.db and its WAL on disk.
	DatabaseBytes int64 `json:"databaseBytes"`
	// Unregistered is the chats no group has that sent messages since
	// the daemon started: nothing answers them.
	Unregistered []Unheard `json:"unregisteredChats"`
}

// Credential is the model credential the daemon hands its agents now, as
// it read it (nanoclawd.env is read again when it changes).
type Credential struct {
	Name        string `json:"name"`        // the variable; "" = none
	FromEnvFile bool   `json:"fromEnvFile"` // read from nanoclawd.env, not the daemon's own environment
	Fingerprint string `json:"fingerprint"` // security.Fingerprint of it: to compare, never the key
}

// Console is where the console listens, or why it does not.
type Console struct {
	URL   string `json:"url,omitempty"`   // where it listens, e.g. http://127.0.0.1:7457 (the port bound, also for port 0); pages go on to http://nanoclawd.localhost:PORT
	Error string `json:"error,omitempty"` // why it is not served (a busy port)
}

// Unheard is a chat no group has, and how many messages it sent.
type Unheard struct {
	ChatJID  string `json:"chatJid"`
	Messages int    `json:"messages"`
}

// Channel is one enabled chat network.
type Channel struct {
	Name      string `json:"name"`
	Connected bool   `json:"connected"`
	// State is the channel's own line: "connected as … since …",
	// "not paired: …", "disconnected since …: reason" (WhatsApp), or
	// "serving SOCKET" (local).
	State string `json:"state"`
	// RetryAt is the next reconnect attempt while disconnected (backoff).
	RetryAt *time.Time `json:"retryAt,omitempty"`
}

// Agents sums up the queue.
type Agents struct {
	Running       int `json:"running"`
	Queued        int `json:"queued"`
	Standby       int `json:"standby"` // started ahead (agent.warm), waiting for a message
	MaxConcurrent int `json:"maxConcurrent"`
}

// Group is one registered group and its agent.
type Group struct {
	Folder string `json:"folder"`
	Name   string `json:"name"`
	JID    string `json:"jid"`
	IsMain bool   `json:"isMain"`
	// Trigger is what a message must start with to call the agent, ""
	// when every message does (the main group, a --no-trigger group).
	Trigger string `json:"trigger"`
	// Agent is running, queued (waiting for a slot), retrying (a failed
	// run waits for its backoff), standby (started ahead, waiting for a
	// message), paused (the owner's /pause: messages kept, no agent starts)
	// or idle.
	Agent        string     `json:"agent"`
	RunningSince *time.Time `json:"runningSince,omitempty"`
	RunningTask  string     `json:"runningTask,omitempty"`
	StandbySince *time.Time `json:"standbySince,omitempty"` // when its standby was started
	QueuedTasks  int        `json:"queuedTasks"`
	Failures     int        `json:"failures"` // failed message runs in a row
	LastRun      *LastRun   `json:"lastRun,omitempty"`
	Usage        *Usage     `json:"usage,omitempty"`
	// Model is the group's model as configured ("" = the SDK's default)
	// and Provider where its requests go; Fallback, when its last request
	// was served by a fallback.
	Model    string    `json:"model"`
	Provider string    `json:"provider"`
	Fallback *Fallback `json:"fallback,omitempty"`
}

// Fallback is the upstream (provider/model) serving a group in place of
// its chosen one, since when.
type Fallback struct {
	Upstream string    `json:"upstream"`
	Since    time.Time `json:"since"`
}

// LastRun is a group's last finished agent run (kept across restarts).
type LastRun struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	OK       bool      `json:"ok"`
	Stopped  bool      `json:"stopped,omitempty"` // the daemon's shutdown ended it (ok: not a failure)
	Error    string    `json:"error,omitempty"`
	TaskID   string    `json:"taskId,omitempty"`
}

// Backlog is the unsent messages of one chat.
type Backlog struct {
	ChatJID   string     `json:"chatJid"` // "" = alerts waiting for a main group
	Count     int        `json:"count"`
	Oldest    time.Time  `json:"oldest"`
	Attempts  int        `json:"attempts"`
	LastError string     `json:"lastError,omitempty"`
	RetryAt   *time.Time `json:"retryAt,omitempty"`
}

// Task is a scheduled task due soon.
type Task struct {
	ID       string    `json:"id"`
	Group    string    `json:"group"`
	Schedule string    `json:"schedule"`
	NextRun  time.Time `json:"nextRun"`
	Prompt   string    `json:"prompt"`
}

// Violations counts one group's blocked actions of one kind.
type Violations struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}

// Listen opens the control socket at path (mode 0600). A socket file left
// by a dead daemon is replaced; the caller holds the single-instance lock,
// so no live daemon owns it.
func Listen(path string) (net.Listener, error) {
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w (a Unix socket path must be under 108 bytes: use a shorter dataDir)", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, nil
}

// Serve answers GET /status on ln with what report returns, until ctx
// ends; then it closes ln (which removes the socket file).
// More routes (the console's login) come in routes.
func Serve(ctx context.Context, ln net.Listener, report func(context.Context) (Report, error), routes ...Route) error {
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.HandleFunc(r.Pattern, r.Handler)
	}
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		rep, err := report(r.Context())
		w.Header().Set("Content-Type", "application/json")
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
			return
		}
		json.NewEncoder(w).Encode(rep)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Fetch asks the daemon on dataDir for its report. ErrNotRunning (wrapped,
// with the socket's path) means nothing answers.
func Fetch(ctx context.Context, dataDir string) (Report, error) {
	path := SocketPath(dataDir)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	var rep Report
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://nanoclawd/status", nil)
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return rep, fmt.Errorf("%w on %s (nothing answers on %s): start it with 'nanoclawd run' or 'nanoclawd service install'", ErrNotRunning, dataDir, path)
		}
		return rep, fmt.Errorf("ask the daemon on %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		json.NewDecoder(resp.Body).Decode(&e)
		return rep, fmt.Errorf("the daemon could not report its status: %s (see its log in %s)", e.Error, layout.New(dataDir, "").Logs())
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return rep, fmt.Errorf("read the daemon's status from %s: %w", path, err)
	}
	return rep, nil
}
