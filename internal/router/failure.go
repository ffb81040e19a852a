package router

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// An agent's error result (status "error": the model API unreachable, the
// credential refused, the API overloaded) is answered in its chat at once
// with one plain sentence, and the owner's main chat gets the detail once
// per kind of failure, until an agent answers again. A failure a retry
// cannot fix (a refused credential, an invalid request) also ends the run,
// instead of leaving it to wait for follow-ups that would fail the same way.

// failure is what an agent's error says, in words for people.
type failure struct {
	kind string // "credential", "request", "overloaded", "unreachable", "other"
	what string // what failed, for the chat: no detail, nothing secret
	fix  string // what the owner can do
	// final: a retry fails the same way, so the run ends.
	final bool
}

// failures are tried in order; the first whose pattern matches the error
// (lower-cased) wins. The patterns are what the Claude CLI says, measured
// against a mock API: "Invalid API key · Fix external API key" (401),
// "Failed to authenticate. API Error: 403 …", "API Error: 400 …",
// "API Error: Connection refused … (ECONNREFUSED)", "API Error: 502 …".
var failures = []struct {
	re *regexp.Regexp
	f  failure
}{
	{regexp.MustCompile(`invalid api key|failed to authenticate|authentication_error|permission_error|oauth token|api error: 40[13]\b|/login`),
		failure{"credential", "the model API refused its credential",
			"Check the key: a new ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from 'claude setup-token') in nanoclawd.env beside the config; 'bin/nanoclawd doctor' checks it.", true}},
	{regexp.MustCompile(`invalid_request_error|api error: 4(00|04|13|22)\b|prompt is too long`),
		failure{"request", "the model API refused the request as invalid",
			"Check the model and options the agent uses; a conversation that grew too long starts afresh with /new.", true}},
	{regexp.MustCompile(`overloaded|api error: 529\b|api error: 429\b|rate.?limit`),
		failure{"overloaded", "the model API is overloaded or over its rate limit",
			"This usually passes within minutes; the next message tries again.", false}},
	{regexp.MustCompile(`connection|econn|enotfound|eai_again|etimedout|timed? ?out|fetch failed|network|socket|api error: 5\d\d\b`),
		failure{"unreachable", "the model API could not be reached",
			"Check this machine's network, and ANTHROPIC_BASE_URL if it is set; the next message tries again.", false}},
}

// noCredential is a credential failure when the daemon gives agents no
// credential at all: nothing was refused, one is missing.
var noCredential = failure{"credential", "no model credential is set: the daemon has no API key or OAuth token to give the model API",
	"Put ANTHROPIC_API_KEY=… (or CLAUDE_CODE_OAUTH_TOKEN=… from 'claude setup-token') in nanoclawd.env beside the config and add its name to agent.env, or run 'nanoclawd setup'; 'nanoclawd doctor' checks it.", true}

// sdkHintRE finds the Claude CLI's advice to its own users ("· Please
// run /login"): nanoclawd has no /login, so a chat must never be told it.
var sdkHintRE = regexp.MustCompile(`(?i)\s*[·•.,;:-]?\s*(please\s+)?(run\s+)?/login\b\.?`)

// withoutSDKHints is an agent's error text as a chat may hear it.
func withoutSDKHints(s string) string { return strings.TrimSpace(sdkHintRE.ReplaceAllString(s, "")) }

// budgetRE finds the relay's word that a group's budget is spent (its
// answer is an invalid request, which the patterns above would take for
// the agent's own mistake).
var budgetRE = regexp.MustCompile(`(?i)(daily|monthly) model budget of group \S+ is spent`)

// unansweredRE finds the relay's word that no upstream answered (an
// invalid request too, so that the SDK does not retry it for minutes).
var unansweredRE = regexp.MustCompile(`(?i)nanoclaw relay: (no model upstream answered|\S+ fell silent)`)

// classify says what an agent's error means.
func classify(errText string) failure {
	if m := budgetRE.FindString(errText); m != "" {
		return failure{"budget", "the " + m, "The owner can raise it: agent.budget in the config, or budget in the group's override.", true}
	}
	if unansweredRE.MatchString(errText) && gateway.Limited(errText) {
		return failure{"overloaded", "the model API is overloaded or over its rate limit",
			"This usually passes within minutes; agent.fallback can name another provider to try. The next message tries again.", true}
	}
	if unansweredRE.MatchString(errText) {
		return failure{"unreachable", "the model API could not be reached",
			"'nanoclawd status' shows which upstream is not answering; agent.fallback can name another provider to try. The next message tries again.", true}
	}
	low := strings.ToLower(errText)
	for _, c := range failures {
		if c.re.MatchString(low) {
			return c.f
		}
	}
	return failure{"other", "the assistant ran into an error", "The group's run log (groups/FOLDER/logs/) has the whole story.", false}
}

// secretRE finds what looks like a credential in an error text, so the
// detail never carries one into a chat.
var secretRE = regexp.MustCompile(`sk-ant-[A-Za-z0-9_-]+|(?i)bearer\s+\S+`)

func redact(s string) string { return secretRE.ReplaceAllString(s, "[redacted]") }

// toldError is a run's error that its chat was already told about: the
// queue neither retries it nor tells the chat again.
type toldError struct{ err error }

func (e *toldError) Error() string { return e.err.Error() }
func (e *toldError) Unwrap() error { return e.err }

func isTold(err error) bool {
	var t *toldError
	return errors.As(err, &t)
}

// ownerNotes remembers which kinds of failure the main chat has heard of,
// so a failing API is reported once, not once per message.
type ownerNotes struct {
	mu   sync.Mutex
	told map[string]bool
}

// first reports whether kind is news to the owner, and marks it told.
func (n *ownerNotes) first(kind string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.told[kind] {
		return false
	}
	if n.told == nil {
		n.told = map[string]bool{}
	}
	n.told[kind] = true
	return true
}

// clear forgets every failure: an agent answered, so the next failure is
// news again.
func (n *ownerNotes) clear() {
	n.mu.Lock()
	n.told = nil
	n.mu.Unlock()
}

// failureNotice is the chat's answer to an agent's error, errText, in
// group g; it tells the main chat the detail once (unless ownerTold: the
// relay already did). In the main chat itself
// the answer carries the detail.
func (r *Router) failureNotice(ctx context.Context, g groups.Group, f failure, errText string, ownerTold bool) string {
	name := r.Config().AssistantName
	detail := withoutSDKHints(redact(firstLine(errText, 300)))
	f.fix = strings.ReplaceAll(f.fix, "FOLDER", g.Folder)
	if g.IsMain {
		r.owner.first(f.kind)
		return fmt.Sprintf("%s could not answer: %s. %s\n(The agent said: %s)", name, f.what, f.fix, detail)
	}
	if r.owner.first(f.kind) && !ownerTold {
		r.tellMain(ctx, fmt.Sprintf("nanoclawd: the assistant of %s (%s) could not answer: %s. %s\n(The agent said: %s)",
			g.Name, g.Folder, f.what, f.fix, detail))
	}
	return fmt.Sprintf("%s could not answer: %s. The owner was told.", name, f.what)
}
