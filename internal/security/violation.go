package security

import "time"

// Violation is one blocked action. It is what a type:"violation" frame
// carries, plus where and when it happened. It lives here, beside the
// policy that refuses, so that its producers (runner, ipc, gateway) need not
// import its consumer (alerts).
type Violation struct {
	Time   time.Time `json:"time"`
	Group  string    `json:"group"`  // folder of the group whose agent (or IPC dir) it came from
	Kind   string    `json:"kind"`   // filesystem | network | permission | tool | ipc | limit
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
