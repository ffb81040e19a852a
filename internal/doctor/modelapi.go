package doctor

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// ModelAPI reports what the model API last said about the daemon's
// credential, as the relay recorded it: a refusal (401/403) stands until
// a request succeeds.
func ModelAPI(ctx context.Context, db *store.DB) Result {
	if db == nil {
		return fix("model api", "not checked: the database could not be opened")
	}
	hs, err := usage.HealthOf(ctx, db)
	if err != nil {
		return fix("model api", "%v", err)
	}
	for _, h := range hs {
		if h.Kind == usage.HealthCredential {
			return fix("model api", "%s since %s: run 'claude setup-token' and put the token in nanoclawd.env as CLAUDE_CODE_OAUTH_TOKEN=…, or put a new ANTHROPIC_API_KEY=… there (the running daemon reads it again by itself; or run 'nanoclawd setup')",
				h.Detail, h.Since.Local().Format(time.DateTime))
		}
	}
	for _, h := range hs {
		if h.Kind == usage.HealthDown {
			return fix("model api", "%s, since %s: check that the provider's server runs and answers (agent.fallback can name another to try); shown until a request succeeds",
				h.Detail, h.Since.Local().Format(time.DateTime))
		}
	}
	for _, h := range hs {
		if h.Kind == usage.HealthRate && h.RetryAt.After(time.Now()) {
			return ok("model api", "the credential works; the API is %s (HTTP %d) until %s", h.Detail, h.Status, h.RetryAt.Local().Format(time.TimeOnly))
		}
	}
	return ok("model api", "no refusal of the credential seen by the relay")
}
