//go:build !linux

package runner

// Mark identifies an agent's process group across a daemon crash. Outside
// Linux there is no /proc to check it against, so nothing is recorded.
type Mark struct {
	PGID   int
	Start  uint64
	BootID string
}

// MarkOf reports false: leftovers are not tracked on this system.
func MarkOf(pid int) (Mark, bool) { return Mark{}, false }

// KillLeftovers does nothing on this system.
func KillLeftovers(Mark) int { return 0 }
