package transcribe

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// The transcriber never reads a group's folder: a group can swap the saved
// voice note for a link to any file between saving and transcribing. It
// reads a copy the daemon writes from the very bytes it received, into a
// directory of the daemon's that no group can write (and no run sees).

// Copy is a voice note's private copy, for the transcriber.
type Copy struct{ Path string }

// Remove deletes the copy once it is transcribed.
func (c Copy) Remove() { os.RemoveAll(filepath.Dir(c.Path)) }

// staleAfter is how old a copy left by a daemon that stopped mid-way
// must be to be tidied up by the next one made.
const staleAfter = time.Hour

// Keep writes data as name into a new directory of dir (the daemon's; see
// layout.Transcribing). u is the user the transcriber runs as: the copy
// is readable by its group, writable by the daemon alone.
func Keep(dir string, u sandbox.User, name string, data []byte) (Copy, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Copy{}, fmt.Errorf("keep a copy to transcribe: %w", err)
	}
	tidy(dir)
	var b [8]byte
	rand.Read(b[:])
	sub := filepath.Join(dir, hex.EncodeToString(b[:]))
	if err := os.Mkdir(sub, 0o700); err != nil {
		return Copy{}, fmt.Errorf("keep a copy to transcribe: %w", err)
	}
	c := Copy{Path: filepath.Join(sub, filepath.Base(name))}
	err := os.WriteFile(c.Path, data, 0o600)
	if err == nil && u.Switches() {
		// Readable for the run user's group, never writable: the daemon's
		// own files, in directories it alone writes.
		for p, mode := range map[string]os.FileMode{dir: 0o710, sub: 0o750, c.Path: 0o640} {
			if err = os.Chown(p, -1, u.GID); err == nil {
				err = os.Chmod(p, mode)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		c.Remove()
		return Copy{}, fmt.Errorf("keep a copy to transcribe: %w", err)
	}
	return c, nil
}

// tidy removes copies older than staleAfter.
func tidy(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleAfter {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}
