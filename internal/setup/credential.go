package setup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// The credential variables the Claude Agent SDK authenticates with.
const (
	APIKeyVar     = "ANTHROPIC_API_KEY"
	OAuthTokenVar = "CLAUDE_CODE_OAUTH_TOKEN"
)

// Credentials is where the model credential comes from and goes to.
type Credentials struct {
	EnvFile  string   // nanoclawd.env beside the config
	FromFile []string // the variables the daemon took from EnvFile
	Getenv   func(string) string
	Setenv   func(name, value string) error
	// APIBase is the Messages API's base URL (ANTHROPIC_BASE_URL, else
	// https://api.anthropic.com).
	APIBase string
	Client  *http.Client // nil: 10 s timeout
}

// Set names the first credential variable that is set, or "".
func (c Credentials) Set() string {
	for _, name := range []string{APIKeyVar, OAuthTokenVar} {
		if c.Getenv(name) != "" {
			return name
		}
	}
	return ""
}

// CredentialNeeded reports whether agents need the daemon's own model
// credential: a group of list (or, with none, every group to come) is on
// the built-in provider (config.OwnCredential).
func CredentialNeeded(cfg *config.Config, list []groups.Group) bool {
	if len(list) == 0 {
		return cfg.OwnCredential("")
	}
	return slices.ContainsFunc(list, func(g groups.Group) bool { return cfg.OwnCredential(g.Provider()) })
}

// Verdicts of Check.
var (
	ErrRejected    = errors.New("the API rejected it")
	ErrUnreachable = errors.New("not checked: the API could not be reached")
)

// Check asks the API whether value (the variable name's credential) is
// accepted: nil, ErrRejected or ErrUnreachable, each wrapped with detail.
func (c Credentials) Check(ctx context.Context, name, value string) error {
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	base := strings.TrimRight(c.APIBase, "/")
	if base == "" {
		base = "https://api.anthropic.com"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models?limit=1", nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	req.Header.Set("anthropic-version", "2023-06-01")
	if name == OAuthTokenVar {
		req.Header.Set("Authorization", "Bearer "+value)
		req.Header.Set("anthropic-beta", "oauth-2025-04-20")
	} else {
		req.Header.Set("x-api-key", value)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w (%s: %v)", ErrUnreachable, base, err)
	}
	defer resp.Body.Close()
	var body struct {
		Error struct{ Message string }
	}
	json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<16)).Decode(&body)
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w (%s: %s)", ErrRejected, resp.Status, body.Error.Message)
	}
	return fmt.Errorf("%w (%s answered %s)", ErrUnreachable, base, resp.Status)
}

// NameFor says which variable a pasted credential belongs in: Claude OAuth
// tokens start with sk-ant-oat.
func NameFor(value string) string {
	if strings.HasPrefix(value, "sk-ant-oat") {
		return OAuthTokenVar
	}
	return APIKeyVar
}

// Save writes NAME=value into EnvFile (mode 0600), replacing an earlier
// line for name and keeping every other line.
func (c Credentials) Save(name, value string) error {
	old, err := os.ReadFile(c.EnvFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", c.EnvFile, err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(old), "\n"), "\n") {
		k, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "export "), "=")
		if l != "" && strings.TrimSpace(k) != name {
			lines = append(lines, l)
		}
	}
	lines = append(lines, name+"="+value)
	return atomicfile.Write(c.EnvFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// credential checks the credential that is set (name), or asks for one.
// It returns the variable that holds it, and missing: why agents still
// have no usable one and the command that fixes it ("" when they have).
func (g *Guide) credential(ctx context.Context, name string) (_, missing string, err error) {
	c := g.Cred
	if name != "" {
		from := "the environment"
		if slices.Contains(c.FromFile, name) {
			from = c.EnvFile
		}
		err := c.Check(ctx, name, c.Getenv(name))
		switch {
		case err == nil:
			fmt.Fprintf(g.Out, "✓ model credential: %s from %s, accepted by the API\n", name, from)
		case errors.Is(err, ErrRejected):
			fmt.Fprintf(g.Out, "✗ model credential: %s from %s: %v\n", name, from, err)
			if from == "the environment" {
				return name, fmt.Sprintf("the API refuses %s, and the environment wins over %s: unset %s there (or put a working one in it), then run '%s'", name, c.EnvFile, name, g.cmd("setup")), nil
			}
			name = ""
		default: // set, but nobody could say whether it works
			fmt.Fprintf(g.Out, "- model credential: %s from %s, %v\n", name, from, err)
		}
	}
	if name == "" && g.NoEcho != nil {
		restore := g.NoEcho() // before the prompt: a paste right after it is not echoed either
		defer restore()
	}
	for name == "" {
		fmt.Fprintf(g.Out, "The model credential: paste an Anthropic API key (sk-ant-api…) or a Claude OAuth token (sk-ant-oat…, from 'claude setup-token').\nIt is saved in %s, readable only by you. Press Enter to skip: ", c.EnvFile)
		value, err := g.ask(ctx, "")
		if err != nil {
			return "", "", err
		}
		if value == "" {
			fmt.Fprintln(g.Out, "✗ model credential: none (skipped)")
			return "", fmt.Sprintf("agents have no model credential, so they cannot answer: run '%s' and paste an API key or OAuth token", g.cmd("setup")), nil
		}
		n := NameFor(value)
		err = c.Check(ctx, n, value)
		if errors.Is(err, ErrRejected) {
			fmt.Fprintf(g.Out, "✗ %v; try again\n", err)
			continue
		}
		if err := c.Save(n, value); err != nil {
			return "", "", err
		}
		if err := c.Setenv(n, value); err != nil {
			return "", "", err
		}
		name = n
		if err == nil {
			fmt.Fprintf(g.Out, "✓ model credential: %s saved in %s, accepted by the API\n", n, c.EnvFile)
		} else {
			fmt.Fprintf(g.Out, "- model credential: %s saved in %s, %v\n", n, c.EnvFile, err)
		}
	}
	if name != "" && !slices.Contains(g.Config.Agent.Env, name) {
		// Agents get only the variables agent.env lists.
		cfg, err := config.Set(g.Config.File, "agent.env", append(slices.Clone(g.Config.Agent.Env), name))
		if err != nil {
			return "", "", fmt.Errorf("hand %s to agents: %w", name, err)
		}
		*g.Config = *cfg
		fmt.Fprintf(g.Out, "✓ agent.env: agents are handed %s (%s)\n", name, g.Config.File)
	}
	return name, "", nil
}
