package daemon

// The disk reserve's wiring: held from the start, given up by a commit
// that finds the disk full (store.DB.Do), the owner told once per time the
// disk fills, and taken again once there is room.

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// diskReserve holds the reserve and remembers whether the owner was told
// that the disk is full since it was last held.
type diskReserve struct {
	d       *Daemon
	reserve *store.Reserve
	told    atomic.Bool
}

// diskCheckEvery is how often a given-up reserve is tried again.
const diskCheckEvery = 10 * time.Second

func newDiskReserve(d *Daemon, path string) *diskReserve {
	r := &diskReserve{d: d, reserve: &store.Reserve{Path: path, Size: store.DefaultReserve}}
	if ok, err := r.reserve.Hold(); !ok {
		d.log.Warn().Err(err).Str("path", path).Msg("no disk reserve: the disk has too little room; a full disk may refuse a message or an answer until there is more")
	}
	return r
}

// full follows a commit that gave the reserve up: the owner hears of it
// once, until the reserve is held again.
func (r *diskReserve) full() {
	if !r.told.CompareAndSwap(false, true) {
		return
	}
	dir := r.d.Config().DataDir
	r.d.log.Error().Str("dataDir", dir).Msg("the disk is full: nanoclawd gave up its reserve to keep messages and answers")
	text := fmt.Sprintf("[DISK] The disk of nanoclawd's data directory %s is full. nanoclawd gave up its reserve of %d MiB so that "+
		"no message or answer is lost; free some space there (a group's folder, its session, ipc/errors/). "+
		"`nanoclawd violations --since 1h` lists the runs stopped for their disk use.", dir, store.DefaultReserve>>20)
	ctx := context.Background()
	tx, err := r.d.db.Begin(ctx)
	if err == nil {
		defer tx.Rollback()
		if err = r.d.reporter.TellOwnerTx(ctx, tx, text); err == nil {
			err = tx.Commit()
		}
	}
	if err != nil {
		r.d.log.Error().Err(err).Msg("could not tell the owner that the disk is full")
	}
}

// Run takes the reserve again once the disk has room for it.
func (r *diskReserve) Run(ctx context.Context) error {
	t := time.NewTicker(diskCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if r.reserve.Held() {
			continue
		}
		if ok, err := r.reserve.Hold(); ok {
			r.told.Store(false)
			r.d.log.Info().Msg("the disk has room again: nanoclawd holds its reserve")
		} else if err != nil {
			r.d.log.Warn().Err(err).Msg("disk reserve")
		}
	}
}
