package main

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// followup replies first, then answers each follow-up with prefix and
// its text.
func followup(session, first, prefix string) {
	dir := ipcDir().Input()
	result(first, session)
	for {
		ents, err := os.ReadDir(dir)
		if err != nil {
			fatal("reading %s: %v", dir, err)
		}
		var files []string
		closing := false
		for _, e := range ents {
			switch {
			case e.Name() == layout.CloseFile:
				closing = true
			case strings.HasSuffix(e.Name(), ".json"):
				files = append(files, e.Name())
			}
		}
		sort.Strings(files)
		for _, f := range files {
			p := filepath.Join(dir, f)
			text, ok, err := protocol.ReadFollowUp(p)
			if err != nil {
				fatal("%v", err)
			}
			if !ok {
				fatal("bad follow-up %s", f)
			}
			os.Remove(p)
			result(prefix+text, session)
		}
		if closing && len(files) == 0 {
			os.Remove(ipcDir().Close())
			result("closed", session)
			return
		}
		time.Sleep(10 * time.Millisecond) // a stand-in agent may poll; the daemon never does
	}
}
