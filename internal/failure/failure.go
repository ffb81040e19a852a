// Package failure says in words for people what an agent's error result
// means: what failed (for the chat: no detail, nothing secret), what the
// owner can do, and whether a retry could help; and it keeps secrets and
// the SDK's own advice out of any detail a chat is shown.
package failure

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Failure is what an agent's error says, in words for people.
type Failure struct {
	Kind string // "credential", "request", "overloaded", "unreachable", "budget", "fenced", "other"
	What string // what failed, for the chat: no detail, nothing secret
	Fix  string // what the owner can do
	// Final: a retry fails the same way, so the run ends.
	Final bool
}

// failures are tried in order; the first whose pattern matches the error
// (lower-cased) wins. The patterns are what the Claude CLI says, measured
// against a mock API: "Invalid API key · Fix external API key" (401),
// "Failed to authenticate. API Error: 403 …", "API Error: 400 …",
// "API Error: Connection refused … (ECONNREFUSED)", "API Error: 502 …".
var failures = []struct {
	re *regexp.Regexp
	f  Failure
}{
	{regexp.MustCompile(`invalid api key|failed to authenticate|authentication_error|permission_error|oauth token|api error: 40[13]\b|/login`),
		Failure{"credential", "the model API refused its credential",
			"Check the key: a new ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from 'claude setup-token') in nanoclawd.env beside the config; 'bin/nanoclawd doctor' checks it.", true}},
	{regexp.MustCompile(`invalid_request_error|api error: 4(00|04|13|22)\b|prompt is too long`),
		Failure{"request", "the model API refused the request as invalid",
			"Check the model and options the agent uses; a conversation that grew too long starts afresh with /new.", true}},
	{regexp.MustCompile(`overloaded|api error: 529\b|api error: 429\b|rate.?limit`),
		Failure{"overloaded", "the model API is overloaded or over its rate limit",
			"This usually passes within minutes; the next message tries again.", false}},
	{regexp.MustCompile(`connection|econn|enotfound|eai_again|etimedout|timed? ?out|fetch failed|network|socket|api error: 5\d\d\b`),
		Failure{"unreachable", "the model API could not be reached",
			"Check this machine's network, and ANTHROPIC_BASE_URL if it is set; the next message tries again.", false}},
}

// NoCredential is a credential failure when the daemon gives agents no
// credential at all (agent.env and the daemon's environment, getenv):
// nothing was refused, one is missing, and Fix names the step still to do.
func NoCredential(agentEnv []string, getenv func(string) string) Failure {
	what := "no model credential is set: the daemon has no API key or OAuth token to give the model API"
	if slices.ContainsFunc(security.ModelCredentials, func(name string) bool { return getenv(name) != "" }) {
		what = "the daemon's model credential is not handed to its agents"
	}
	return Failure{"credential", what, MissingCredential(agentEnv, getenv) + "; 'nanoclawd doctor' checks it.", true}
}

// MissingCredential says the one step still missing before agents get a
// model credential: naming a variable that is set in agent.env, setting
// one that agent.env names, or both.
func MissingCredential(agentEnv []string, getenv func(string) string) string {
	var listed []string
	for _, name := range security.ModelCredentials {
		switch in := slices.Contains(agentEnv, name); {
		case in:
			listed = append(listed, name)
		case getenv(name) != "":
			return fmt.Sprintf("%s is set, but agents get only what agent.env lists: add %q to agent.env in the config", name, name)
		}
	}
	switch len(listed) {
	case 0:
	case 1:
		return fmt.Sprintf("agent.env lists %s, but it is set nowhere: put %s=… in nanoclawd.env beside the config, or run 'nanoclawd setup'", listed[0], listed[0])
	default:
		return fmt.Sprintf("agent.env lists %s, but none is set: put %s=… in nanoclawd.env beside the config, or run 'nanoclawd setup'", strings.Join(listed, " and "), listed[0])
	}
	return "put ANTHROPIC_API_KEY=… (or CLAUDE_CODE_OAUTH_TOKEN=… from 'claude setup-token') in nanoclawd.env beside the config and add its name to agent.env, or run 'nanoclawd setup'"
}

// NotSent is a credential failure the agent reports when no upstream
// refused anything (none answered 401 or 403): its request never reached
// the model API with a credential the relay knows.
var NotSent = Failure{"credential", "the agent's request did not reach the model API with a credential",
	"'nanoclawd doctor' shows the credential the daemon gives agents; a provider's own is providers.NAME.credential in the config.", true}

// sdkHintRE finds the Claude CLI's advice to its own users ("· Please
// run /login"): nanoclawd has no /login, so a chat must never be told it.
var sdkHintRE = regexp.MustCompile(`(?i)\s*[·•.,;:-]?\s*(please\s+)?(run\s+)?/login\b\.?`)

// WithoutSDKHints is an agent's error text as a chat may hear it.
func WithoutSDKHints(s string) string { return strings.TrimSpace(sdkHintRE.ReplaceAllString(s, "")) }

// budgetRE finds the relay's word that a group's budget is spent (its
// answer is an invalid request, which the patterns above would take for
// the agent's own mistake).
var budgetRE = regexp.MustCompile(`(?i)(daily|monthly) model budget of group \S+ is spent`)

// unansweredRE finds the relay's word that no upstream answered (an
// invalid request too, so that the SDK does not retry it for minutes).
var unansweredRE = regexp.MustCompile(`(?i)nanoclaw relay: (no model upstream answered|\S+ fell silent)`)

// Classify says what an agent's error means.
func Classify(errText string) Failure {
	if m := budgetRE.FindString(errText); m != "" {
		return Failure{"budget", "the " + m, "The owner can raise it: agent.budget in the config, or budget in the group's override.", true}
	}
	if gateway.Fenced(errText) {
		return Failure{"fenced", "it asked the model API to fetch from where this group may not reach",
			"The [SANDBOX ALERT] names the host: /allow with its code, or add it to the group's network.allowedDomains.", true}
	}
	if unansweredRE.MatchString(errText) && gateway.Limited(errText) {
		return Failure{"overloaded", "the model API is overloaded or over its rate limit",
			"This usually passes within minutes; agent.fallback can name another provider to try. The next message tries again.", true}
	}
	if unansweredRE.MatchString(errText) {
		return Failure{"unreachable", "the model API could not be reached",
			"'nanoclawd status' shows which upstream is not answering; agent.fallback can name another provider to try. The next message tries again.", true}
	}
	low := strings.ToLower(errText)
	for _, c := range failures {
		if c.re.MatchString(low) {
			return c.f
		}
	}
	return Failure{"other", "the assistant ran into an error", "The group's run log (groups/FOLDER/logs/) has the whole story.", false}
}

// secretRE finds what looks like a credential in an error text, so the
// detail never carries one into a chat.
var secretRE = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+|(?i)bearer\s+\S+`)

func Redact(s string) string { return secretRE.ReplaceAllString(s, "[redacted]") }

// SessionGone tells whether an agent's error says its saved session no
// longer exists.
func SessionGone(errText string) bool {
	return strings.Contains(strings.ToLower(errText), "no conversation found")
}
