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

// TellMain queues text as a notice (KindNotice) for the main group's chat:
// the one way the daemon's parts tell the owner something. Without a main
// group the notice is dropped; a failure to queue it is logged, never the
// caller's to handle. A full disk gives up the daemon's reserve rather
// than the notice.
func (o *Outbox) TellMain(ctx context.Context, text string) {
	ctx = context.WithoutCancel(ctx) // a notice outlives a request cut short
	err := o.db.Do(ctx, func(tx *store.Tx) error { return o.TellMainTx(ctx, tx, text) })
	if err != nil && !errors.Is(err, ErrNoMain) {
		o.log.Error().Err(err).Msg("tell the main group")
	}
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
