package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
)

// What a run sees of a file, for the daemon when it acts on a file a
// group names (a message's attachment): the same rules as the plan, so
// the daemon never reads for a group what the group could not.

// DeniedBy is the denyRead entry that cuts path out of a run's view, or
// "": a path is cut out when it is, or lies under, a literal entry; when
// one of its components below within (the group's folder) matches an
// entry "**/name"; or when it or a directory above it matches another
// glob entry.
func DeniedBy(path, within string, deny []string) string {
	rel, err := filepath.Rel(within, path)
	if err != nil || !filepath.IsLocal(rel) {
		rel = ""
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	for _, d := range deny {
		if name, ok := strings.CutPrefix(d, "**/"); ok {
			if slices.ContainsFunc(parts, func(p string) bool { ok, _ := filepath.Match(name, p); return ok }) {
				return d
			}
			continue
		}
		if !strings.ContainsAny(d, "*?[") {
			if under(path, []string{d}) {
				return d
			}
			continue
		}
		for p := path; ; p = filepath.Dir(p) {
			if ok, _ := filepath.Match(d, p); ok {
				return d
			}
			if p == filepath.Dir(p) {
				break
			}
		}
	}
	return ""
}

// ProtectedName is the protected name rel (a path in a group's folder)
// is or lies in, or "": only the owner writes those, and the daemon keeps
// some of them (.mcp.json, .envrc) out of the run's reach altogether.
func ProtectedName(rel string) string {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/")
	for _, pr := range Protected {
		if parts[0] == pr.Name {
			return pr.Name
		}
	}
	for _, p := range parts {
		if slices.Contains(ProtectedAnywhere, p) {
			return p
		}
	}
	return ""
}
