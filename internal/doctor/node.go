package doctor

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// nodeEOL is the day each Node release line reaches its end of life, as
// nodejs.org's release schedule gives it: after it, no security fixes.
// Even majors are LTS lines (30 months); odd ones live six months.
var nodeEOL = map[int]string{
	18: "2025-04-30", 19: "2023-06-01", 20: "2026-04-30", 21: "2024-06-01",
	22: "2027-04-30", 23: "2025-06-01", 24: "2028-04-30", 25: "2026-06-01",
	26: "2029-04-30",
}

// nodePastEOL says, for node major at now, when its line's life ended;
// "" while it is maintained (or not in the table: newer than this build).
func nodePastEOL(major int, now time.Time) string {
	day, ok := nodeEOL[major]
	if !ok {
		return ""
	}
	end, err := time.Parse(time.DateOnly, day)
	if err != nil || now.Before(end.AddDate(0, 0, 1)) {
		return ""
	}
	return day
}

// nodeFix is how the owner gets a supported node.
func nodeFix() string {
	return fmt.Sprintf("run 'make build' in the checkout (it leaves node %d or later at bin/node: the machine's own when new enough, else an LTS from npm), or install a current LTS from https://nodejs.org", MinNode)
}

// nodeProgram is the node agent.command runs, or plain "node".
func nodeProgram(command []string) string {
	if len(command) > 0 && strings.HasPrefix(filepath.Base(command[0]), "node") {
		return command[0]
	}
	return "node"
}

// Node finds program and checks that it is node MinNode or later.
func Node(ctx context.Context, env Env, program string) Result {
	path, err := env.LookPath(program)
	if err != nil {
		return fix("node", "%s not found on PATH: install node %d or later (brew install node, or https://nodejs.org)", program, MinNode)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return fix("node", "%s --version failed: %v: reinstall node %d or later", path, err, MinNode)
	}
	version := strings.TrimSpace(string(out))
	major, valid := NodeMajor(version)
	if !valid {
		return fix("node", "%s --version said %q, not a node version: put node %d or later first on PATH", path, version, MinNode)
	}
	if major < MinNode {
		return fix("node", "%s is %s, too old: the agent runner needs node %d or later: %s", path, version, MinNode, nodeFix())
	}
	if day := nodePastEOL(major, time.Now()); day != "" {
		return fix("node", "%s is %s, whose line reached its end of life on %s (no more security fixes): %s", path, version, day, nodeFix())
	}
	return ok("node", "%s %s", path, version)
}
