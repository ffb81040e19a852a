package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Last is the outcome of the last backup of an install, kept in
// layout.LastBackup for `nanoclawd status` and the daily summary.
type Last struct {
	Time     time.Time `json:"time"`
	OK       bool      `json:"ok"`
	Archive  string    `json:"archive,omitempty"`
	Bytes    int64     `json:"bytes,omitempty"`
	Verified bool      `json:"verified,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Record writes how the backup that ended at t went (err nil: res).
func Record(l layout.Layout, t time.Time, res Result, err error) error {
	last := Last{Time: t.UTC(), OK: err == nil, Archive: res.Archive, Bytes: res.Bytes, Verified: res.Verified}
	if err != nil {
		last.Error = err.Error()
	}
	body, _ := json.Marshal(last)
	if err := atomicfile.Write(l.LastBackup(), body, 0o600); err != nil {
		return fmt.Errorf("backup: record the result: %w", err)
	}
	return nil
}

// ReadLast returns the last backup's outcome; ok is false when none was
// recorded.
func ReadLast(l layout.Layout) (last Last, ok bool, err error) {
	body, err := os.ReadFile(l.LastBackup())
	if errors.Is(err, fs.ErrNotExist) {
		return Last{}, false, nil
	}
	if err != nil {
		return Last{}, false, err
	}
	if err := json.Unmarshal(body, &last); err != nil {
		return Last{}, false, fmt.Errorf("%s: %w (delete it; the next backup writes it again)", l.LastBackup(), err)
	}
	return last, true, nil
}

// String is the outcome in one line: "ok at …: ARCHIVE (N MB, verified)"
// or "FAILED at …: reason".
func (l Last) String() string {
	at := l.Time.Local().Format("2006-01-02 15:04")
	if !l.OK {
		return fmt.Sprintf("FAILED at %s: %s", at, l.Error)
	}
	v := ""
	if l.Verified {
		v = ", verified"
	}
	return fmt.Sprintf("ok at %s: %s (%.1f MB%s)", at, l.Archive, float64(l.Bytes)/1e6, v)
}
