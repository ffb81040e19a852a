package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
)

// A tool is a program the daemon runs for a confined group outside its
// runs (the voice-note transcriber): it gets the same kernel surface as a
// run, as the run's user, and sees even less — the system runtime, its
// own program and the files its arguments name (a model), the paths it
// is given, a private /tmp, and no network at all.

// ToolPlan is the confinement of argv (argv[0] found in PATH), shown
// readOnly besides, working in workdir.
func ToolPlan(argv, readOnly []string, workdir string, l Limits) Plan {
	argv = slices.Clone(argv)
	if len(argv) > 0 {
		argv[0] = lookPath(argv[0])
	}
	p := Plan{Network: "none", Limits: l, Argv: argv, Workdir: workdir}
	p.Mounts = append(p.Mounts, Mount{Path: "/tmp", Mode: Private, Why: "private /tmp", Dir: true})
	add := func(path, why string) {
		fi, err := os.Lstat(path)
		if err != nil || slices.ContainsFunc(p.Mounts, func(m Mount) bool { return m.Path == path }) {
			return
		}
		m := Mount{Path: path, Mode: ReadOnly, Why: why, Dir: fi.IsDir()}
		if fi.Mode()&fs.ModeSymlink != 0 {
			m.Link, _ = os.Readlink(path)
		}
		p.Mounts = append(p.Mounts, m)
	}
	for _, s := range System {
		add(s, whySystem)
	}
	for _, f := range commandFiles(argv) {
		if !under(f, System) {
			add(f, "the program and its files")
		}
	}
	for _, r := range readOnly {
		add(r, "what it is given")
	}
	return p
}

// ToolCommand is the command line that runs p's program confined as u,
// the seccomp filter handed over as fd 3 (Launch.Files).
func ToolCommand(p Plan, u User) (Launch, error) {
	if runtime.GOOS != "linux" {
		return Launch{}, fmt.Errorf("%w: a helper program is confined on Linux only", ErrUnavailable)
	}
	// No lifeline for a helper: the filter is the first descriptor, 3.
	return bwrapLaunch(p, u, 3, p.Argv)
}
