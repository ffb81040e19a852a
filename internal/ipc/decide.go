package ipc

import (
	"context"
	"errors"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// decision is the verdict on one file before anything is done about it.
type decision struct {
	accept bool
	req    protocol.Request
	from   groups.Group
	to     *groups.Group // message, schedule_task: the registered group of the chat named, if any
	reason string
	alert  bool
	group  string // who tried: the directory's group, or the token's owner
	target string
	kind   security.Kind       // of a refusal; "" = security.KindIPC
	file   *channel.Attachment // an accepted message's file: the daemon's copy
}

func refuse(f ref, reason, target string, alert bool) decision {
	return decision{reason: reason, target: target, alert: alert, group: f.folder}
}

// violation is what a refusal is audited (and maybe alerted) as.
func (w *Watcher) violation(f ref, d decision) security.Violation {
	target := d.target
	if target == "" {
		target = "ipc/" + f.String()
	}
	kind := d.kind
	if kind == "" {
		kind = security.KindIPC
	}
	// Rule "ipc" for a file outside the folder too: no configuration
	// lets a group send what is not its own, whatever its kind says.
	return security.Violation{Time: w.now().UTC(), Group: d.group, Kind: kind, Tool: "ipc", Target: target,
		Detail: fmt.Sprintf("%s (file ipc/%s)", d.reason, f), Action: "blocked", Rule: "ipc"}
}

// view is what one batch knows of the registry, the run tokens and the
// group directories: its files are decided against one moment, and each
// lookup is made once. A batch ends after a register_group, so no file is
// decided against a registry that its batch has changed.
type view struct {
	w        *Watcher
	byFolder map[string]groupAnswer
	byJID    map[string]groupAnswer
	tokens   map[[2]string]tokenAnswer
	dirs     *dirs
}

type groupAnswer struct {
	g  groups.Group
	ok bool
}

type tokenAnswer struct {
	ok    bool
	owner string
}

func (w *Watcher) newView() *view {
	return &view{w: w, byFolder: map[string]groupAnswer{}, byJID: map[string]groupAnswer{},
		tokens: map[[2]string]tokenAnswer{}, dirs: w.newDirs()}
}

// group looks key up in the registry once per batch; ok is false for a
// group not registered.
func (v *view) group(ctx context.Context, memo map[string]groupAnswer, key string,
	look func(context.Context, string) (groups.Group, error)) (groups.Group, bool, error) {
	if a, ok := memo[key]; ok {
		return a.g, a.ok, nil
	}
	g, err := look(ctx, key)
	if errors.Is(err, groups.ErrNotFound) {
		memo[key] = groupAnswer{}
		return groups.Group{}, false, nil
	}
	if err == nil {
		memo[key] = groupAnswer{g, true}
	}
	return g, err == nil, err
}

func (v *view) groupByFolder(ctx context.Context, folder string) (groups.Group, bool, error) {
	return v.group(ctx, v.byFolder, folder, v.w.cfg.Groups.ByFolder)
}

func (v *view) groupByJID(ctx context.Context, jid string) (groups.Group, bool, error) {
	return v.group(ctx, v.byJID, jid, v.w.cfg.Groups.ByJID)
}

func (v *view) checkToken(ctx context.Context, folder, token string) (bool, string, error) {
	key := [2]string{folder, token}
	if a, ok := v.tokens[key]; ok {
		return a.ok, a.owner, nil
	}
	ok, owner, err := v.w.cfg.Tokens.Check(ctx, folder, token)
	if err == nil {
		v.tokens[key] = tokenAnswer{ok, owner}
	}
	return ok, owner, err
}

// decide judges f. An error means it could not be judged now (the
// database failed); the file stays and is tried again.
func (v *view) decide(ctx context.Context, f *file) (decision, error) {
	if f.bad != "" {
		return refuse(f.ref, f.bad, "", false), nil
	}
	from, ok, err := v.groupByFolder(ctx, f.folder)
	if err != nil {
		return decision{}, err
	}
	if !ok {
		return refuse(f.ref, fmt.Sprintf("ipc/%s is not a registered group's directory", f.folder), "", false), nil
	}
	req, derr := protocol.DecodeRequest(f.data, scheduler.Validate)
	switch {
	case errors.Is(derr, protocol.ErrSyntax):
		return refuse(f.ref, "bad JSON: "+derr.Error(), "", false), nil
	case errors.Is(derr, protocol.ErrNoToken):
		return refuse(f.ref, derr.Error(), "ipc/"+f.folder, true), nil
	}
	ok, owner, err := v.checkToken(ctx, f.folder, req.Token)
	if err != nil {
		return decision{}, err
	}
	if !ok {
		if owner != "" {
			d := refuse(f.ref, fmt.Sprintf("token of a run of group %s, found in ipc/%s: %s tried to act as %s",
				owner, f.folder, owner, f.folder), "ipc/"+f.folder, true)
			d.group = owner
			return d, nil
		}
		return refuse(f.ref, "wrong or expired token", "ipc/"+f.folder, true), nil
	}
	if derr != nil {
		return refuse(f.ref, derr.Error(), "", false), nil
	}
	if protocol.Dir(req.Type) != f.sub {
		return refuse(f.ref, fmt.Sprintf("type %s belongs in %s/, not %s/", req.Type, protocol.Dir(req.Type), f.sub), "", false), nil
	}
	facts, err := v.facts(ctx, req)
	if err != nil {
		return decision{}, err
	}
	if r := Authorize(from, req, facts); r != nil {
		return refuse(f.ref, r.Reason, r.Target, r.Alert), nil
	}
	d := decision{accept: true, req: req, from: from, to: facts.Target, group: f.folder}
	if req.File != "" {
		// The sender's own folder, main's included: what a group may send
		// is what it may read.
		l := v.w.cfg.Layout
		var view RunView
		if v.w.cfg.View != nil {
			view = v.w.cfg.View(from)
		}
		file, r, err := stageFile(l.Group(f.folder), req.File, l.Outgoing(), view)
		if err != nil {
			return decision{}, err
		}
		if r != nil {
			d := refuse(f.ref, r.Reason, r.Target, r.Alert)
			d.kind = r.Kind
			return d, nil
		}
		d.file = &file
	}
	return d, nil
}

func (v *view) facts(ctx context.Context, req protocol.Request) (Facts, error) {
	var f Facts
	jid := req.ChatJID
	if req.Type == protocol.TypeScheduleTask {
		jid = req.TargetJID
	}
	if jid != "" && (req.Type == protocol.TypeMessage || req.Type == protocol.TypeReaction || req.Type == protocol.TypeScheduleTask ||
		req.Type == protocol.TypeSearchHistory) {
		g, ok, err := v.groupByJID(ctx, jid)
		if err != nil {
			return f, err
		}
		if ok {
			f.Target = &g
		}
	}
	if req.TaskID != "" {
		// Not remembered: the task may change within the batch, and the
		// change itself checks again inside the transaction.
		t, err := v.w.cfg.Tasks.Get(ctx, req.TaskID)
		if err != nil && !errors.Is(err, scheduler.ErrNotFound) {
			return f, err
		}
		f.TaskFolder = t.GroupFolder
	}
	if req.Type == protocol.TypeRegisterGroup {
		g, ok, err := v.groupByFolder(ctx, req.Folder)
		if err != nil {
			return f, err
		}
		if ok {
			f.FolderOwner = g.JID
		}
	}
	return f, nil
}
