package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Checkpointer moves the WAL into the database file in the background.
//
// SQLite's automatic checkpoint runs inside whichever commit crosses its
// threshold and pays the checkpoint's fsync there: every hundred or so
// IPC files, one commit took 8–15 ms, which was most of IPC→sent's p99.
// The daemon's connections turn it off and this goroutine checkpoints
// instead, shortly after commits; when nothing commits it sleeps, so an
// idle daemon still never wakes up. Other processes (the CLI) keep
// SQLite's default.
//
// A burst (a group writing a hundred thousand IPC files) must not grow the
// WAL without bound either: a PASSIVE checkpoint copies pages back but
// never shrinks the file, and one that a reader keeps from finishing
// lets the WAL grow past it. So once the WAL is over walLimit, a TRUNCATE
// checkpoint (which waits for readers and empties the file) follows, and
// journal_size_limit trims the WAL whenever SQLite restarts it.
type Checkpointer struct {
	db      *sql.DB
	wal     string        // the WAL's path
	commits chan struct{} // capacity 1: something committed since the last checkpoint
}

// walLimit is the WAL size past which the checkpointer empties it.
const walLimit = 16 << 20

// checkpointDelay lets a burst of commits finish before a checkpoint.
const checkpointDelay = 50 * time.Millisecond

// OpenWithCheckpointer is Open for the daemon: the same database, whose
// WAL checkpoints run in the returned Checkpointer's Run.
func OpenWithCheckpointer(dataDir string) (*DB, *Checkpointer, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	path := layout.New(dataDir, "").DB()
	c := &Checkpointer{wal: path + "-wal", commits: make(chan struct{}, 1)}
	c.db = sql.OpenDB(connector{checkpointDriver(c), DSN(path)})
	if err := migrate(c.db, path); err != nil {
		return nil, nil, err
	}
	return Wrap(c.db), c, nil
}

// Run checkpoints after commits until ctx ends. A PASSIVE checkpoint
// never blocks a writer; one that could not finish (a reader holds old
// pages) is simply done again after the next commit.
func (c *Checkpointer) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.commits:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(checkpointDelay):
		}
		if _, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil && ctx.Err() == nil && !Busy(err) {
			return fmt.Errorf("checkpoint the WAL: %w", err)
		}
		if fi, err := os.Stat(c.wal); err == nil && fi.Size() > walLimit {
			if err := c.truncate(ctx); err != nil && ctx.Err() == nil && !Busy(err) {
				return fmt.Errorf("checkpoint the WAL: %w", err)
			}
		}
	}
}

// truncate empties the WAL if no reader needs it now. A TRUNCATE
// checkpoint that waits (the busy timeout) holds every writer back while
// it waits for readers, so it is tried without waiting and simply tried
// again after a later commit.
func (c *Checkpointer) truncate(ctx context.Context) error {
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return err
	}
	// Back to the DSN's wait before the connection returns to the pool.
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = 5000")
	_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}

// connector opens connections of one DSN through drv, so that a DB gets
// the ConnectHook without a globally registered driver name.
type connector struct {
	drv driver.Driver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }
