package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

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

// ConsoleLogin asks the daemon on dataDir for a one-time login URL of its
// console. Only the daemon's user reaches the control socket (mode 0600),
// so only they get one.
func ConsoleLogin(ctx context.Context, dataDir string) (string, error) {
	path := SocketPath(dataDir)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://nanoclawd"+ConsoleLoginPath, nil)
	resp, err := client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return "", fmt.Errorf("%w on %s (nothing answers on %s): start it with 'nanoclawd run' or 'nanoclawd service install'", ErrNotRunning, dataDir, path)
		}
		return "", fmt.Errorf("ask the daemon on %s: %w", path, err)
	}
	defer resp.Body.Close()
	var out struct{ URL, Error string }
	if resp.StatusCode == http.StatusNotFound {
		return "", fmt.Errorf("the daemon on %s is older than 'nanoclawd console': restart it", dataDir)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("read the daemon's answer from %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%w: %s (see its log in %s)", ErrNoConsole, out.Error, layout.New(dataDir, "").Logs())
	}
	return out.URL, nil
}

// consoleLine is status's line about the console.
func consoleLine(p func(string, ...any), c *Console) {
	switch {
	case c == nil:
		p("Console: off (console.enabled is false)")
	case c.Error != "":
		p("Console: not served: %s", c.Error)
	default:
		p("Console: %s ('nanoclawd console' prints a login URL)", c.URL)
	}
}
