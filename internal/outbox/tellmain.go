package outbox

import (
	"context"
	"errors"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// ErrNoMain is a notice for the main chat while no main group is
// registered (or an outbox was made without a MainChat): it is not
// queued. Most callers drop such a notice silently.
var ErrNoMain = errors.New("no main group is registered to tell")

// TellMain queues text as a notice (KindNotice) for the main group's chat.
// A full disk gives up the daemon's reserve rather than the notice.
func (o *Outbox) TellMain(ctx context.Context, text string) error {
	return o.db.Do(ctx, func(tx *store.Tx) error { return o.TellMainTx(ctx, tx, text) })
}

// TellMainTx is TellMain inside the caller's transaction: the notice is
// queued if and only if tx commits.
func (o *Outbox) TellMainTx(ctx context.Context, tx *store.Tx, text string) error {
	if o.main == nil {
		return ErrNoMain
	}
	_, jid, ok := o.main.MainChat(ctx)
	if !ok {
		return ErrNoMain
	}
	_, err := o.EnqueueTx(ctx, tx, jid, text, KindNotice)
	return err
}
