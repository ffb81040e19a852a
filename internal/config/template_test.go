package config

import (
	"bytes"
	"os/exec"
	"testing"
)

// The copy the binary carries is the top-level nanoclaw.config.jsonc as
// committed (HEAD), never the working tree's: that file is the owner's to
// edit, and an edit must not fail this test.
func TestTemplateIsTheCommittedConfig(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: the committed config cannot be read")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): the committed config cannot be read", err)
	}
	committed, err := exec.Command("git", "-C", string(bytes.TrimSpace(top)), "show", "HEAD:nanoclaw.config.jsonc").Output()
	if err != nil {
		t.Fatalf("git show HEAD:nanoclaw.config.jsonc: %v (the config a fresh clone runs with must be committed at the top)", err)
	}
	if !bytes.Equal(committed, Template) {
		t.Errorf("internal/config/template.jsonc differs from the committed nanoclaw.config.jsonc: copy one onto the other (cp nanoclaw.config.jsonc internal/config/template.jsonc) and commit both")
	}
}
