package ipc

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Decided counts the request files in the journal by verdict: handled
// (its effect done) and refused (quarantined). The journal forgets old
// decided files, so these are counts of its window, not of all time.
func Decided(ctx context.Context, db *store.DB) (handled, refused int64, err error) {
	err = db.QueryRowContext(ctx, `SELECT coalesce(sum(status != ?), 0), coalesce(sum(status = ?), 0) FROM ipc_journal`,
		statusRefused, statusRefused).Scan(&handled, &refused)
	if err != nil {
		return 0, 0, fmt.Errorf("ipc: count decided files: %w", err)
	}
	return handled, refused, nil
}
