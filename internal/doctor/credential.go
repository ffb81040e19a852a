package doctor

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/setup"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

// Credential is the credentials check as the install needs it: none when
// no group is on the built-in provider (every provider has its own
// credential, or takes none), else Credentials; and, when a daemon runs,
// the credential it gives agents now, which is not always what this
// process read (its own environment wins over nanoclawd.env). list is the
// registered groups, running the running daemon's report (nil: none).
func Credential(ctx context.Context, env Env, cfg *config.Config, list []groups.Group, running *status.Report) Result {
	r := ok("credentials", "none needed: no group is on the built-in provider (each provider has its own or takes none)")
	if setup.CredentialNeeded(cfg, list) {
		r = Credentials(ctx, env, cfg)
	}
	if running != nil {
		r.More = append(r.More, daemonCredential(*running, env.Getenv))
	}
	return r
}

// daemonCredential says which credential the running daemon of rep gives
// agents, and whether it is the one getenv has.
func daemonCredential(rep status.Report, getenv func(string) string) string {
	c := rep.Credential
	line := fmt.Sprintf("the running daemon (PID %d) gives agents %s", rep.PID, c)
	if c.Name == "" {
		return line
	}
	here := getenv(c.Name)
	switch {
	case here != "" && security.Fingerprint(here) == c.Fingerprint:
		return line + ", the same as here"
	case c.FromEnvFile:
		return line + "; here it is another: the daemon reads nanoclawd.env again as it changes"
	}
	return line + "; its own environment wins over nanoclawd.env: change it there and restart the daemon"
}
