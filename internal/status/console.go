package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/fit"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Route is one more request the control socket answers.
type Route struct {
	Pattern string
	Handler http.HandlerFunc
}

// ConsoleLoginPath is the control socket's request for a one-time login URL.
const ConsoleLoginPath = "/console/login"

// ErrNoConsole: the daemon runs without its console.
var ErrNoConsole = errors.New("the daemon serves no console")

// Login is the daemon's answer to ConsoleLogin: a one-time login URL and,
// when asked for, a private file (mode 0600) whose page opens it, so a
// browser can be started on the file instead of the URL.
type Login struct {
	URL  string `json:"url"`
	File string `json:"file,omitempty"`
}

// ConsoleLogin asks the daemon on dataDir for a one-time login URL of its
// console (and with page, its page file). Only the daemon's user reaches
// the control socket (mode 0600), so only they get one.
func ConsoleLogin(ctx context.Context, dataDir string, page bool) (Login, error) {
	path := SocketPath(dataDir)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	u := "http://nanoclawd" + ConsoleLoginPath
	if page {
		u += "?page=1"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return Login{}, fmt.Errorf("%w on %s (nothing answers on %s): start it with 'nanoclawd run' or 'nanoclawd service install'", ErrNotRunning, dataDir, path)
		}
		return Login{}, fmt.Errorf("ask the daemon on %s: %w", path, err)
	}
	defer resp.Body.Close()
	var out struct {
		Login
		Error string
	}
	if resp.StatusCode == http.StatusNotFound {
		return Login{}, fmt.Errorf("the daemon on %s is older than 'nanoclawd console': restart it", dataDir)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return Login{}, fmt.Errorf("read the daemon's answer from %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusConflict {
		return Login{}, fmt.Errorf("%w: %s (see its log in %s)", ErrNoConsole, out.Error, layout.New(dataDir, "").Logs())
	}
	if resp.StatusCode != http.StatusOK {
		return Login{}, fmt.Errorf("the daemon on %s could not make a login URL: %s", dataDir, out.Error)
	}
	return out.Login, nil
}

// consoleLine is status's line about the console.
func consoleLine(p func(string, ...any), c *Console) {
	switch {
	case c == nil:
		p("Console: off (console.enabled is false)")
	case c.Error != "":
		p("%s", fit.Wrap("Console: not served:", c.Error, "  "))
	default:
		p("Console: %s ('nanoclawd console' prints a login URL)", c.URL)
	}
}
