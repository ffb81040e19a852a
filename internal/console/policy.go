package console

import (
	"cmp"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// policyRow is one line of a group's policy as its page shows it: what it
// may read, write and reach, in words, with the values that decide it.
type policyRow struct {
	What   string
	Values []string
	None   string // said when Values is empty
}

// shownValues is how many values a row shows before "and N more".
const shownValues = 12

// Shown and More split a long row (denyRead holds every file of the data
// directory) into what is shown and what is behind a disclosure.
func (r policyRow) Shown() []string { return r.Values[:min(len(r.Values), shownValues)] }
func (r policyRow) More() []string  { return r.Values[min(len(r.Values), shownValues):] }

// own is paths with the group's folder first, named so: a confined run
// may always read and write it, whether the policy lists it or not.
func own(paths []string, dir string) []string {
	out := []string{dir + " (its folder)"}
	for _, p := range paths {
		if p != dir {
			out = append(out, p)
		}
	}
	return out
}

// policyRows reads a group's effective policy (security.Resolve's, as
// `security show` prints it) as an owner asks about it. dir is the
// group's folder.
func policyRows(e security.Effective, dir string) []policyRow {
	model := []policyRow{{What: "Model", Values: []string{cmp.Or(e.Model, "the SDK's default") + " from " + e.Provider}}}
	if e.IsMain {
		return append([]policyRow{{What: "Confinement", Values: []string{
			"none: the main group is the owner's own, with every tool, no sandbox, and what the daemon's user may read, write and reach"}}}, model...)
	}
	sandbox := "on: every run is confined by the OS; nothing below it is reachable"
	if !e.Sandbox {
		sandbox = "off: the SDK's permission rules only"
	}
	var enter, held []string
	for _, v := range e.Env.Enter {
		enter = append(enter, v.Name+" ("+v.Why+")")
	}
	for _, v := range e.Env.HeldBack {
		held = append(held, v.Name+" ("+v.Why+")")
	}
	return append([]policyRow{
		{What: "Sandbox", Values: []string{sandbox}},
		{What: "May read", Values: own(e.AllowRead, dir)},
		{What: "Never reads", Values: e.DenyRead, None: "nothing more is hidden"},
		{What: "May write", Values: own(e.AllowWrite, dir)},
		{What: "Never writes", Values: e.DenyWrite, None: "nothing more is kept read-only"},
		{What: "May reach", Values: e.Network.AllowedDomains, None: "no network: commands and web tools reach nothing"},
		{What: "Never reaches", Values: e.Network.DeniedDomains, None: "nothing more is refused"},
		{What: "Tools", Values: append(append([]string(nil), e.Tools...), "the nanoclaw tools ("+security.NanoclawTools+")")},
		{What: "Permission mode", Values: []string{e.PermissionMode}},
		{What: "Secrets entering its runs", Values: enter, None: "none"},
		{What: "Secrets held back", Values: held, None: "none"},
	}, model...)
}
