package approvals

import (
	"context"
	"fmt"
	"strings"
)

// The audit trail's actions of the owner's changes made only from the
// console (the chat has no command for them).
const (
	ActionSessionReset = "session-reset-by-owner"
	ActionTaskChanged  = "task-changed-by-owner" // run now, paused or resumed: the detail says which
)

// Act carries out one of the owner's commands given outside the chat (the
// console): the same verbs, checks, effects and audit lines as Handle, in
// one transaction, and returns the answer the chat would have got instead
// of queueing it. who names the owner in the audit trail.
func (c *Commands) Act(ctx context.Context, text, who string) (string, error) {
	args := strings.Fields(text)
	if len(args) == 0 || !IsCommand(text) {
		return "", fmt.Errorf("approvals: %q is not one of the owner's commands (/allow, /undo, /pause, /resume, /groups)", text)
	}
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("approvals: begin: %w", err)
	}
	defer tx.Rollback()
	verb := strings.ToLower(args[0])
	reply, after, err := c.do(ctx, tx, verb, args[1:], who)
	if err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("approvals: commit %s: %w", verb, err)
	}
	if err := c.Audit.Flush(ctx); err != nil {
		c.Log.Warn().Err(err).Msg("approvals: audit lines of an owner's change")
	}
	if after != nil {
		after()
	}
	return reply, nil
}
