package ipc

import (
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Facts are the lookups a request's authorization depends on, done by the
// caller so that Authorize stays a pure function.
type Facts struct {
	// Target is the registered group of the message's chatJid or the
	// task's targetJid; nil when that chat is not registered.
	Target *groups.Group
	// TaskFolder is the group folder of the task named by taskId; "" when
	// there is no such task.
	TaskFolder string
	// FolderOwner is the JID already registered under register_group's
	// folder, "" when the folder is free.
	FolderOwner string
}

// Refusal says why a file is not carried out. Alert marks a cross-group
// attempt (or a token problem), which the main group is told about. Kind
// is what the audit calls it: security.KindIPC when empty,
// security.KindFilesystem for a file to send from outside the group's folder.
type Refusal struct {
	Reason string
	Target string
	Alert  bool
	Kind   security.Kind
}

func (r *Refusal) Error() string { return r.Reason }

// Authorize applies the contract's table to a decoded request from the
// group that owns the directory it was found in. It returns nil when the
// request may be carried out.
func Authorize(from groups.Group, r protocol.Request, f Facts) *Refusal {
	switch r.Type {
	case protocol.TypeMessage, protocol.TypeReaction:
		if from.IsMain {
			return nil
		}
		if f.Target == nil || f.Target.Folder != from.Folder {
			verb := "message"
			if r.Type == protocol.TypeReaction {
				verb = "react in"
			}
			return &Refusal{Alert: true, Target: r.ChatJID,
				Reason: fmt.Sprintf("group %s may only %s its own chat, not %s", from.Folder, verb, r.ChatJID)}
		}
	case protocol.TypeScheduleTask:
		if r.TargetJID == "" {
			return nil // its own chat
		}
		if f.Target == nil {
			return &Refusal{Alert: !from.IsMain, Target: r.TargetJID,
				Reason: fmt.Sprintf("targetJid %s is not a registered group; register it first or leave targetJid out", r.TargetJID)}
		}
		if !from.IsMain && f.Target.Folder != from.Folder {
			return &Refusal{Alert: true, Target: r.TargetJID,
				Reason: fmt.Sprintf("group %s may only schedule tasks for itself, not for %s", from.Folder, f.Target.Folder)}
		}
	case protocol.TypePauseTask, protocol.TypeResumeTask, protocol.TypeCancelTask, protocol.TypeUpdateTask:
		if f.TaskFolder == "" {
			return &Refusal{Target: r.TaskID, Reason: fmt.Sprintf("no task %q; see current_tasks.json for the ids", r.TaskID)}
		}
		if !from.IsMain && f.TaskFolder != from.Folder {
			return &Refusal{Alert: true, Target: "task " + r.TaskID + " of " + f.TaskFolder,
				Reason: fmt.Sprintf("group %s may only change its own tasks; %s belongs to %s", from.Folder, r.TaskID, f.TaskFolder)}
		}
	case protocol.TypeSearchHistory:
		// Without chatJid a group searches its own chat. Main may name any
		// registered chat; another group naming a chat not its own is a
		// cross-group attempt, whether or not that chat is registered.
		if r.ChatJID == "" || r.ChatJID == from.JID {
			return nil
		}
		if !from.IsMain {
			return &Refusal{Alert: true, Target: r.ChatJID,
				Reason: fmt.Sprintf("group %s may only search its own chat, not %s", from.Folder, r.ChatJID)}
		}
		if f.Target == nil {
			return &Refusal{Target: r.ChatJID,
				Reason: fmt.Sprintf("chat %s is not a registered group's; see available_groups.json", r.ChatJID)}
		}
	case protocol.TypeRegisterGroup, protocol.TypeRefreshGroups:
		if !from.IsMain {
			return &Refusal{Alert: true, Target: r.Type,
				Reason: fmt.Sprintf("%s is for the main group only, and %s is not main", r.Type, from.Folder)}
		}
		if r.Type == protocol.TypeRegisterGroup && f.FolderOwner != "" && f.FolderOwner != r.JID {
			return &Refusal{Target: r.Folder,
				Reason: fmt.Sprintf("folder %s already belongs to chat %s; pick another folder", r.Folder, f.FolderOwner)}
		}
	default:
		return &Refusal{Reason: fmt.Sprintf("unknown type %q", r.Type)}
	}
	return nil
}
