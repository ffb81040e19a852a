// Package fswatch tells when a file changes. Editors and tools replace
// files in many ways (write in place, rename over, remove and create), and
// a watch on a file is lost when it is replaced, so the file's directory
// is watched, not the file.
package fswatch

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// File returns a channel that receives after path changes (created,
// written, renamed over or removed) and has then been quiet for settle.
// Changes that come faster than they are read are folded into one. An
// overflow of the kernel's event queue counts as a change, since dropped
// events never come back. The channel closes when ctx ends.
func File(ctx context.Context, path string, settle time.Duration) (<-chan struct{}, error) {
	return Files(ctx, settle, path)
}

// Files is File for any of paths: a change to one or more of them is one
// receive.
func Files(ctx context.Context, settle time.Duration, paths ...string) (<-chan struct{}, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", paths[0], err)
	}
	watched := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		watched[p] = true
		if err := fsw.Add(filepath.Dir(p)); err != nil {
			fsw.Close()
			return nil, fmt.Errorf("watch %s: %w (does its directory exist?)", p, err)
		}
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		defer fsw.Close()
		var quiet <-chan time.Time
		changed := func() {
			if settle > 0 {
				quiet = time.After(settle)
				return
			}
			notify(out)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-fsw.Errors:
				changed()
			case ev := <-fsw.Events:
				if watched[filepath.Clean(ev.Name)] && !ev.Has(fsnotify.Chmod) {
					changed()
				}
			case <-quiet:
				quiet = nil
				notify(out)
			}
		}
	}()
	return out, nil
}

func notify(out chan struct{}) {
	select {
	case out <- struct{}{}:
	default: // one is waiting to be read already
	}
}
