package approvals

import (
	"context"
	"errors"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// ActionModel is written to the audit trail when the owner sets a
// group's model from the main chat.
const ActionModel = "model-set-by-owner"

// model says (no model given) or sets folder's model, as
// `nanoclawd groups set-model` does; an unknown model is refused with the
// known ones.
func (c *Commands) model(ctx context.Context, tx *store.Tx, args []string, who string) (string, func(), error) {
	if len(args) < 1 || len(args) > 2 {
		return "Write /model FOLDER to see a group's model, or /model FOLDER MODEL to set it: nothing changed.", nil, nil
	}
	folder := args[0]
	g, err := groups.ByFolderTx(ctx, tx, folder)
	if errors.Is(err, groups.ErrNotFound) {
		return fmt.Sprintf("There is no group %s (/groups lists them): nothing changed.", folder), nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	cfg := c.Config()
	current := ModelOf(g.Security, cfg.Agent.Model)
	if len(args) == 1 {
		return fmt.Sprintf("%s uses %s. /model %s MODEL sets another.", folder, current, folder), nil, nil
	}
	model := args[1]
	if err := cfg.CheckModel(model); err != nil {
		return fmt.Sprintf("Not set: %v.", err), nil, nil
	}
	next := g.Security.WithModel(model)
	if err := groups.SetSecurityTx(ctx, tx, folder, next); err != nil {
		return "", nil, err
	}
	detail := fmt.Sprintf("%s set the model of group %s to %s (was %s)", who, folder, model, current)
	if err := c.Audit.RecordTx(ctx, tx, security.Violation{Time: c.now(), Group: folder, Kind: "group", Tool: "owner",
		Target: model, Detail: detail, Action: ActionModel, Rule: "model"}, false); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("%s now uses %s (was %s), from its next model request.", folder, model, current), c.changed, nil
}

// ModelOf says which model a group with override o uses, in words.
func ModelOf(o *security.Policy, global string) string {
	switch {
	case o != nil && o.Model != "":
		return o.Model
	case global != "":
		return global + " (agent.model)"
	}
	return "the SDK's default model"
}
