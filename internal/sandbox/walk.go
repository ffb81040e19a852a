package sandbox

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
)

// maxWalk bounds the entries looked at in one tree for the cut-outs
// ("**/name" denyRead globs, nested protected names), so that a huge tree
// cannot stall a run's start. A tree a run can write that holds more is
// never half-checked: the run is not started (Plan.Unchecked), because
// the group itself could have padded it to push a cut-out past the end.
var maxWalk = 200_000

// findNames lists the paths below root whose base name matches one of
// the patterns, passing over the trees in skip (other than root itself),
// and tells whether it looked at all of root within maxWalk entries.
func findNames(root string, patterns, skip []string) (out []string, complete bool) {
	budget := maxWalk
	complete = true
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if budget--; budget < 0 {
			complete = false
			return filepath.SkipAll
		}
		if d.IsDir() && path != root && slices.Contains(skip, path) {
			return filepath.SkipDir
		}
		for _, pat := range patterns {
			if ok, _ := filepath.Match(pat, d.Name()); ok && path != root {
				out = append(out, path)
				if d.IsDir() {
					return filepath.SkipDir
				}
				break
			}
		}
		return nil
	})
	return out, complete
}

// uncheckedError is why a run whose plan has Unchecked trees is not
// started, with the fix.
func uncheckedError(p Plan) error {
	return fmt.Errorf("%w: %s holds more than %d entries, so the denyRead cut-outs and protected repositories in it cannot all be found; "+
		"remove files there (or move a large tree out of the group's writable paths) and the next message starts the agent again",
		ErrUnavailable, p.Unchecked[0], maxWalk)
}
