package ipc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// TokenGrace is how long a finished run's token still proves a file, so a
// file written just before the run ended (or the daemon crashed) is handled.
const TokenGrace = 2 * time.Minute

// Tokens issues and checks the per-run NANOCLAW_IPC_TOKEN secrets. Only a
// SHA-256 of each token is stored, with its group folder and issue time.
type Tokens struct {
	db  *store.DB
	now func() time.Time
}

// OpenTokens returns the token store. Runs still live in the database were
// cut short by a restart: they count as finished now, so their files are
// accepted for TokenGrace more.
func OpenTokens(ctx context.Context, db *store.DB) (*Tokens, error) {
	t := &Tokens{db: db, now: time.Now}
	now := t.now().UnixMilli()
	if _, err := db.ExecContext(ctx, `UPDATE ipc_tokens SET finished_at = ? WHERE finished_at IS NULL`, now); err != nil {
		return nil, fmt.Errorf("ipc tokens: finish runs of the previous daemon: %w", err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM ipc_tokens WHERE finished_at < ?`, now-(24*time.Hour).Milliseconds()); err != nil {
		return nil, fmt.Errorf("ipc tokens: prune: %w", err)
	}
	return t, nil
}

func hashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Issue returns a fresh 256-bit token for a run of folder.
func (t *Tokens) Issue(ctx context.Context, folder string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ipc token: %w", err)
	}
	token := hex.EncodeToString(b[:])
	if _, err := t.db.ExecContext(ctx, `INSERT INTO ipc_tokens (hash, folder, issued_at) VALUES (?, ?, ?)`,
		hashToken(token), folder, t.now().UnixMilli()); err != nil {
		return "", fmt.Errorf("ipc token for %s: %w", folder, err)
	}
	return token, nil
}

// Finish marks the run ended; its token stays valid for TokenGrace.
func (t *Tokens) Finish(ctx context.Context, token string) error {
	if _, err := t.db.ExecContext(ctx, `UPDATE ipc_tokens SET finished_at = ? WHERE hash = ? AND finished_at IS NULL`,
		t.now().UnixMilli(), hashToken(token)); err != nil {
		return fmt.Errorf("finish ipc token: %w", err)
	}
	return nil
}

// Check reports whether token belongs to a current or just-finished run of
// folder. When it belongs to another group's run, owner names that group.
// Every valid token is compared in constant time, with no early exit.
func (t *Tokens) Check(ctx context.Context, folder, token string) (ok bool, owner string, err error) {
	rows, err := t.db.QueryContext(ctx, `SELECT hash, folder FROM ipc_tokens WHERE finished_at IS NULL OR finished_at >= ?`,
		t.now().Add(-TokenGrace).UnixMilli())
	if err != nil {
		return false, "", fmt.Errorf("check ipc token: %w", err)
	}
	defer rows.Close()
	want := hashToken(token)
	for rows.Next() {
		var h []byte
		var f string
		if err := rows.Scan(&h, &f); err != nil {
			return false, "", fmt.Errorf("check ipc token: %w", err)
		}
		if subtle.ConstantTimeCompare(h, want) == 1 {
			owner = f
		}
	}
	if err := rows.Err(); err != nil {
		return false, "", fmt.Errorf("check ipc token: %w", err)
	}
	if owner != "" && owner == folder {
		return true, "", nil
	}
	return false, owner, nil
}
