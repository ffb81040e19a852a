package bench

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// BenchmarkSandboxKernelSurface: building a run's sandbox around /bin/true
// as runs get it (as the runs' user, no nested user namespaces, the
// seccomp filter, a bounded /dev/shm) against the same sandbox as it was
// before those (the daemon's user, no filter). The two take turns, so a
// busy machine weighs on both alike; the difference is what the smaller
// kernel surface costs each agent start.
func BenchmarkSandboxKernelSurface(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap is not installed")
	}
	user := sandbox.RunUser(sandbox.User{UID: sandbox.DefaultRunID, GID: sandbox.DefaultRunID})
	const samples = 40
	var hardened, plain []time.Duration
	b.ResetTimer()
	for range samples {
		cmd, err := sandbox.ProbeCommand(context.Background(), bwrap, user)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		hardened = append(hardened, time.Since(t0))
		cmd.ExtraFiles[0].Close()

		args := slices.DeleteFunc(slices.Clone(cmd.Args[1:]), func(a string) bool { return a == "--disable-userns" })
		if i := slices.Index(args, "--seccomp"); i >= 0 {
			args = slices.Delete(args, i, i+2)
		}
		t0 = time.Now()
		if out, err := exec.Command(bwrap, args...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		plain = append(plain, time.Since(t0))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(hardened), "hardened-p50-ms")
	b.ReportMetric(p50(plain), "plain-p50-ms")
}
