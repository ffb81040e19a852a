package sandbox

// Weaker is what the confinement on goos lacks against Linux's, one line
// each: doctor and security test print them, and docs/security.md lists
// them (a test keeps it in step), so no difference is a silent one.
func Weaker(goos string) []string {
	if goos != "darwin" {
		return nil
	}
	return []string{
		"macOS: no seccomp filter: the Seatbelt profile alone bounds what the kernel lets a run do",
		"macOS: no cgroups or /proc: a run's memory is not limited; its disk use counts files, not deleted ones held open",
		"macOS: no PID or network namespace: the profile allows the gateway's port and signals to the run's own processes",
		"macOS: a transcriber program is not confined: it runs as the daemon's user (refused when that is root)",
	}
}
