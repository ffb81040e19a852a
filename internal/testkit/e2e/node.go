package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// The agents run on the Node that `make build` leaves at bin/node (a
// supported LTS: the machine's own when new enough, else one installed
// from npm). Tests run on it too: the daemon a test builds finds it
// beside itself, as an installed one does, and tests that start node
// themselves ask Node for it.

// repoNode is the checkout's bin/node, "" when make build has not made it.
func repoNode() string {
	root, err := moduleRoot()
	if err != nil {
		return ""
	}
	p := filepath.Join(root, "bin", "node")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Node is the node program tests run the agent runner with: the
// checkout's bin/node, else the first node on PATH.
func Node(tb testing.TB) string {
	tb.Helper()
	if p := repoNode(); p != "" {
		return p
	}
	return "node"
}

// linkNode puts a link to the checkout's bin/node beside the binaries
// built into dir, where the daemon looks for the node a bare "node" in
// agent.command means.
func linkNode(dir string) error {
	p := repoNode()
	if p == "" {
		return nil
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return err
	}
	link := filepath.Join(dir, "node")
	os.Remove(link)
	return os.Symlink(real, link)
}
