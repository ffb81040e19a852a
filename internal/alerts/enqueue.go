package alerts

import (
	"context"
	"database/sql"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// enqueueTx queues an alert for chat, or, when chat is NULL (no main group
// yet), for the main group once one is registered.
func (r *Reporter) enqueueTx(ctx context.Context, tx *store.Tx, chat sql.NullString, text, kind string) (int64, error) {
	if !chat.Valid {
		return r.out.EnqueueForMainTx(ctx, tx, text, kind)
	}
	return r.out.EnqueueTx(ctx, tx, chat.String, text, kind)
}
