package confine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// The watch on a confined run, for what the kernel cannot limit by itself
// (memory, disk): Watch before the run starts, Started once its process
// runs, Finish after it ended. A run that goes over a limit is reported
// and its processes are killed.

// Watch gives the run a memory cgroup when it has a memory limit (the
// spec starts the run inside it). A cgroup's limit counts shared memory
// too; where the daemon cannot make one, the watch measures resident
// memory alone.
func (c *Confinement) Watch() {
	if c.Plan.Limits.Memory <= 0 {
		return
	}
	cg, err := sandbox.NewRunCgroup("run-"+c.group+"-"+filepath.Base(c.Plan.Socket), c.Plan.Limits.Memory)
	if err != nil {
		c.log.Debug().Err(err).Str("group", c.group).Msg("no memory cgroup for the run")
		return
	}
	c.cgroup, c.spec.CgroupFD = cg, cg.FD
}

// Started watches the run whose sandbox has process id pid; a run that
// goes over a limit is reported and its processes are killed.
func (c *Confinement) Started(pid int) {
	go sandbox.Watch(pid, c.Plan.Workdir, c.Plan.Limits, c.stop, func(what string) {
		c.overLimit(what)
		syscall.Kill(-pid, syscall.SIGKILL)
	})
	c.disk.start = time.Now()
	go c.watchDisk(pid)
}

// overLimit records and reports that the run went over a limit.
func (c *Confinement) overLimit(what string) {
	c.mu.Lock()
	c.over = what
	c.mu.Unlock()
	limit, _, _ := strings.Cut(what, ":")
	c.report(security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindLimit, Tool: "sandbox", Target: limit,
		Detail: what, Action: "blocked", Rule: "agent.limits"}, "report a run over its limit")
}

// Exceeded is the limit the run went over, or "".
func (c *Confinement) Exceeded() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

// Finish ends the gateway and the watch and tidies up after the run: no
// file the run made keeps a setuid or setgid bit (the seccomp filter
// refuses to set one; each found anyway is cleared and reported).
func (c *Confinement) Finish() {
	close(c.stop)
	if c.cgroup != nil {
		if c.cgroup.OOMKilled() && c.Exceeded() == "" {
			c.overLimit(fmt.Sprintf("memory: the run's memory, shared memory included, went over its limit of %d MiB", c.Plan.Limits.Memory>>20))
		}
		c.cgroup.Close()
	}
	c.Close()
	c.finishDisk()
	var writable []string
	for _, m := range c.Plan.Mounts {
		if m.Mode == sandbox.ReadWrite && m.Dir {
			writable = append(writable, m.Path)
		}
	}
	for _, f := range sandbox.Sweep(writable, c.Launch.User) {
		c.report(security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindFilesystem, Tool: "sandbox", Target: f,
			Detail: "a file the run made had a setuid or setgid bit; the bit was cleared", Action: "blocked", Rule: "no setuid files"}, "report a setuid file")
	}
}

// report records v; what failed it is logged as doing.
func (c *Confinement) report(v security.Violation, doing string) {
	if err := c.reporter.Report(context.Background(), v); err != nil {
		c.log.Error().Err(err).Str("group", c.group).Msg(doing)
	}
}
