package store

import (
	"context"
	"database/sql"
	"time"
)

// DB is the database. Its Begin is the one way a transaction is opened:
// it waits out another writer, and its Tx runs OnCommit hooks. The
// *sql.DB stays private so that nothing else can open one.
type DB struct {
	db      *sql.DB
	reserve *Reserve
	onFull  func() // told when the reserve was given up
}

// Wrap makes db a DB. Open and OpenFile are the usual way; Wrap is for
// a database opened otherwise (a test's, with its own DSN).
func Wrap(db *sql.DB) *DB { return &DB{db: db} }

// QueryContext, QueryRowContext and ExecContext read, and write outside
// a transaction (one statement, autocommitted). DB has no BeginTx: every
// transaction is opened by Begin.
func (db *DB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return db.db.QueryContext(ctx, query, args...)
}

func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return db.db.QueryRowContext(ctx, query, args...)
}

func (db *DB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return db.db.ExecContext(ctx, query, args...)
}

// Close closes the database.
func (db *DB) Close() error { return db.db.Close() }

// KeepReserve has Do give r up when the disk is full, telling onFull
// (which may be nil) each time it does. Call it before the DB is shared.
func (db *DB) KeepReserve(r *Reserve, onFull func()) { db.reserve, db.onFull = r, onFull }

// Do runs f in a transaction and commits it. If the disk is full, it
// gives up the disk reserve and runs f again in a new transaction, once:
// for what must not be lost for want of space (a message acknowledged to
// its channel, an agent's finished answer). f must do nothing but its
// work in tx, since it may run twice.
func (db *DB) Do(ctx context.Context, f func(tx *Tx) error) error {
	err := db.do(ctx, f)
	if !Full(err) || db.reserve == nil || !db.reserve.Release() {
		return err
	}
	err = db.do(ctx, f)
	if db.onFull != nil {
		db.onFull()
	}
	return err
}

func (db *DB) do(ctx context.Context, f func(tx *Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// Tx is a transaction of DB. Code that works inside a caller's
// transaction takes a *Tx, and says with OnCommit what must follow the
// commit (the outbox's wake), so that no caller has to remember it.
type Tx struct {
	*sql.Tx
	onCommit []func()
}

// busyWait bounds how long Begin waits for a database another connection
// or process holds locked. Some transactions hold what exists only in
// memory (an agent's answer): dropped, it is lost, so the wait is long.
const busyWait = 2 * time.Minute

// Begin opens a write transaction, trying again with a growing pause (up
// to busyWait in all, and while ctx lasts) as long as the database is
// locked. With _txlock=immediate a lock refuses at BEGIN, before anything
// is written, so trying again is safe.
func (db *DB) Begin(ctx context.Context) (*Tx, error) {
	tx, err := db.db.BeginTx(ctx, nil)
	for wait, until := 100*time.Millisecond, time.Now().Add(busyWait); Busy(err) && time.Now().Before(until); wait = min(2*wait, 2*time.Second) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		tx, err = db.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx}, nil
}

// OnCommit has f run after the transaction commits; a rollback (or a
// failed commit) drops it.
func (tx *Tx) OnCommit(f func()) { tx.onCommit = append(tx.onCommit, f) }

// Commit commits the transaction and then runs its OnCommit hooks, once.
func (tx *Tx) Commit() error {
	hooks := tx.onCommit
	tx.onCommit = nil
	if err := tx.Tx.Commit(); err != nil {
		return err
	}
	for _, f := range hooks {
		f()
	}
	return nil
}

// Rollback undoes the transaction and drops its OnCommit hooks. After a
// Commit it does nothing (and returns sql.ErrTxDone), so it may be
// deferred.
func (tx *Tx) Rollback() error {
	tx.onCommit = nil
	return tx.Tx.Rollback()
}
