package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/selftest"
)

// securityTest is 'nanoclawd security test'.
type securityTest struct{}

func (securityTest) Usage() string { return "security test [--json]" }

func (c securityTest) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	asJSON := fs.Bool("json", false, "print JSON: the OS, ok, and each boundary with its status and what was reached")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	rep, err := selftest.Run(ctx, selftest.Options{Config: cfg, Binary: bin, Weaken: os.Getenv(selftest.WeakenEnv)})
	if err != nil {
		return fmt.Errorf("the security test could not run, so nothing is proven: %w (see 'nanoclawd doctor')", err)
	}
	if *asJSON {
		if err := writeJSON(g.stdout, rep); err != nil {
			return err
		}
	} else {
		for _, b := range rep.Boundaries {
			fmt.Fprintln(g.stdout, strings.TrimSpace(fmt.Sprintf("%-10s %-6s  %s", b.Boundary, b.Status, b.Detail)))
		}
		for _, w := range rep.Weaker {
			fmt.Fprintln(g.stdout, "weaker:", w)
		}
	}
	if broken := rep.Broken(nil); len(broken) > 0 {
		names := make([]string, len(broken))
		for i, b := range broken {
			names[i] = b.Boundary
		}
		return exitCode{code: 1, err: fmt.Errorf("the sandbox does not hold on this machine: %s broken; confined groups are not safe here until it does", strings.Join(names, ", "))}
	}
	return nil
}
