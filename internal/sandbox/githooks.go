package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hookDirs are the directories git runs hooks from for a repository in or
// above groupDir or nested in it (nested: the .git paths a walk found)
// that lie inside groupDir: each repository's core.hooksPath (its own
// config, or the owner's global one), resolved as git does. The owner's
// next commit runs what is there as the owner, so the run must not write
// them. The common hook managers' directories (.githooks, .husky) are
// protected names already.
func hookDirs(groupDir string, nested []string) []string {
	home, _ := os.UserHomeDir()
	var global []string
	for _, f := range []string{filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config", "git", "config"), "/etc/gitconfig"} {
		global = append(global, hooksPaths(f)...)
	}
	var worktrees []string
	for d := groupDir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			worktrees = append(worktrees, d)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, n := range nested {
		worktrees = append(worktrees, filepath.Dir(n))
	}
	var out []string
	for _, wt := range worktrees {
		for _, hp := range append(repoHooksPaths(filepath.Join(wt, ".git")), global...) {
			p := hp
			switch {
			case strings.HasPrefix(p, "~/"):
				p = filepath.Join(home, p[2:])
			case !filepath.IsAbs(p):
				p = filepath.Join(wt, p) // relative to the top of the worktree, where hooks run
			}
			p = filepath.Clean(p)
			if under(p, []string{groupDir}) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// repoHooksPaths are the core.hooksPath values of the repository whose
// .git (a directory, or a file saying "gitdir: …") is dotGit.
func repoHooksPaths(dotGit string) []string {
	dir := dotGit
	if fi, err := os.Stat(dotGit); err == nil && !fi.IsDir() {
		b, err := os.ReadFile(dotGit)
		if err != nil {
			return nil
		}
		gd, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
		if !ok {
			return nil
		}
		if dir = strings.TrimSpace(gd); !filepath.IsAbs(dir) {
			dir = filepath.Join(filepath.Dir(dotGit), dir)
		}
	}
	out := hooksPaths(filepath.Join(dir, "config"))
	if b, err := os.ReadFile(filepath.Join(dir, "commondir")); err == nil { // a linked worktree shares its main repository's config
		common := strings.TrimSpace(string(b))
		if !filepath.IsAbs(common) {
			common = filepath.Join(dir, common)
		}
		out = append(out, hooksPaths(filepath.Join(common, "config"))...)
	}
	return out
}

// hooksPaths reads the core.hooksPath values of one git config file
// (sections and keys are case-insensitive; a quoted value is unquoted).
func hooksPaths(file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "[") {
			name, _, _ := strings.Cut(strings.Trim(l, "[]"), " ")
			section = strings.ToLower(strings.TrimSpace(name))
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if ok && section == "core" && strings.EqualFold(strings.TrimSpace(k), "hookspath") {
			if v = strings.Trim(strings.TrimSpace(v), `"`); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}
