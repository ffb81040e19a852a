package outbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// A message with a file refers to the daemon's copy of it (layout's
// Outgoing dir), which the outbox owns once the row is queued.

// dropFile removes the copy of a message's file once the message is sent
// or given up (it is never offered again). A failure only leaves a file
// behind, which SweepFiles removes later.
func (o *Outbox) dropFile(f *channel.Attachment) {
	if f == nil {
		return
	}
	if err := os.Remove(f.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		o.log.Warn().Err(err).Str("file", f.Path).Msg("outbox: removing a sent file's copy failed")
	}
}

// SweepFiles removes the files in dir that no waiting message refers to
// and that are older than grace: copies left by a crash between the copy
// and its message being queued, or whose removal failed. grace leaves
// alone a copy made just now whose message is about to be queued.
func (o *Outbox) SweepFiles(ctx context.Context, dir string, grace time.Duration) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("outbox: sweep files: %w", err)
	}
	cutoff := time.Now().Add(-grace)
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		var n int
		if err := o.db.QueryRowContext(ctx, `SELECT count(*) FROM outbox
			WHERE file_path = ? AND sent_at IS NULL AND failed_at IS NULL`, path).Scan(&n); err != nil {
			return fmt.Errorf("outbox: sweep files: %w", err)
		}
		if n == 0 {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("outbox: sweep files: %w", err)
			}
		}
	}
	return nil
}
