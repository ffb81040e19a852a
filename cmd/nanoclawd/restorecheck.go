package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/config"
)

// restoredPathWarnings reads the config a restore brought back (written
// as the install's own, beside it as .restored, or the same as the kept
// one) and names, line by line, each path in it that does not exist on
// this machine: agent.command, dataDir, groupsDir. An archive made on
// another machine or in another directory points at that one's paths; a
// restore rewrites nothing, so it says which lines to fix.
func restoredPathWarnings(plan []backup.Action, cfg *config.Config) []string {
	file := ""
	for _, a := range plan {
		if a.Entry == backup.ConfigEntry {
			file = a.Target
			if file == "" {
				file = a.Kept
			}
		}
	}
	if file == "" {
		return nil
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	// Paths resolve against the install's config directory, where the
	// restored config is meant to be used.
	var raw config.Config
	pos, _ := config.DecodeStrict(file, src, &raw, true)
	restored, err := config.Parse(cfg.File, src)
	if err != nil {
		return []string{fmt.Sprintf("the restored config %s is not valid here: %v", file, err)}
	}
	var out []string
	warn := func(key, format string, args ...any) {
		line := 0
		if off, ok := pos[key]; ok {
			line, _ = config.LineCol(src, off)
		}
		where := file
		if line > 0 {
			where = fmt.Sprintf("%s:%d", file, line)
		}
		out = append(out, fmt.Sprintf("%s: %s: %s", where, key, fmt.Sprintf(format, args...)))
	}
	if _, set := pos["dataDir"]; set && !exists(restored.DataDir) {
		warn("dataDir", "%s does not exist here; this restore wrote the data into %s: change that line to %q", restored.DataDir, cfg.DataDir, cfg.DataDir)
	}
	if _, set := pos["groupsDir"]; set && !exists(restored.GroupsDir) {
		warn("groupsDir", "%s does not exist here; this restore wrote the groups into %s: change that line to %q", restored.GroupsDir, cfg.GroupsDir, cfg.GroupsDir)
	}
	for i, a := range restored.Agent.Command {
		key := fmt.Sprintf("agent.command[%d]", i)
		if _, set := pos[key]; !set {
			break // the default command, not the archive's
		}
		switch {
		case i == 0 && !strings.Contains(a, "/"):
			if _, err := exec.LookPath(a); err != nil {
				warn(key, "the program %q is not on this machine's PATH: install it, or name its full path on that line", a)
			}
		case filepath.IsAbs(a) && !exists(a):
			warn(key, "%s does not exist here: change that line to where that file is on this machine", a)
		}
	}
	return out
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
