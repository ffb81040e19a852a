package security

import (
	"context"
	"time"
)

// Kind says what sort of action was refused. The agent runner sends the
// first four in its violation frames; ipc and limit are the daemon's own.
type Kind string

const (
	KindFilesystem Kind = "filesystem" // a path the sandbox hides or keeps read-only
	KindNetwork    Kind = "network"    // a host outside the allowed domains
	KindPermission Kind = "permission" // refused by the SDK's permission rules
	KindTool       Kind = "tool"       // a tool the group may not use
	KindIPC        Kind = "ipc"        // an IPC file acting for another group
	KindLimit      Kind = "limit"      // a run over its memory, CPU or process limit
)

// Reporter records a violation (alerts.Reporter does). Its users (router,
// gateway, groupfs, runner, ipc) take it so that they need not import alerts.
type Reporter interface {
	Report(ctx context.Context, v Violation) error
}

// Violation is one blocked action. It is what a type:"violation" frame
// carries, plus where and when it happened. It lives here, beside the
// policy that refuses, so that its producers (runner, ipc, gateway) need not
// import its consumer (alerts).
type Violation struct {
	Time   time.Time `json:"time"`
	Group  string    `json:"group"` // folder of the group whose agent (or IPC dir) it came from
	Kind   Kind      `json:"kind"`
	Tool   string    `json:"tool"`   // e.g. Bash, Read, ipc
	Target string    `json:"target"` // path, host, chat or group
	Detail string    `json:"detail"`
	// Action is "blocked" when nanoclawd, the OS sandbox or the SDK's
	// permission layer verifiably refused; "reported" when it was only
	// seen in a tool's output (a hint, not a proof).
	Action string `json:"action"`
	// Rule names what refused it (a config key), for the fix hint and the
	// RULE column of `nanoclawd violations`; kept out of the JSON so the
	// audit line keeps its documented fields.
	Rule string `json:"-"`
}
