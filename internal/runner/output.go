package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// readLines calls fn for each line of r (without the newline or a trailing
// CR). A line longer than limit is cut to limit bytes and the rest discarded, so
// a flooding agent costs reading time but never memory. line is reused
// after fn returns.
func readLines(r io.Reader, limit int, fn func(line []byte, cut bool)) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf []byte
		cut bool
	)
	for {
		chunk, err := br.ReadSlice('\n')
		complete := len(chunk) > 0 && chunk[len(chunk)-1] == '\n'
		if complete {
			chunk = chunk[:len(chunk)-1]
		}
		if room := limit - len(buf); len(chunk) > room {
			buf = append(buf, chunk[:max(room, 0)]...)
			cut = true
		} else {
			buf = append(buf, chunk...)
		}
		if complete {
			fn(bytes.TrimSuffix(buf, []byte("\r")), cut)
			buf, cut = buf[:0], false
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(buf) > 0 || cut {
				fn(buf, cut)
			}
			return
		}
	}
}

// runLog is one run's log file, capped in size. The runner's own notes get
// a little headroom past the cap so the exit line always makes it in.
type runLog struct {
	mu   sync.Mutex
	f    *os.File // nil until made
	held []byte   // what was written before f was made
	path string
	err  error         // why f could not be made
	made chan struct{} // closed once f or err is set
	max  int64
	n    int64
	full bool
}

const logHeadroom = 64 << 10

// openRunLog creates a new run log in dir, the group's logs/, through
// groupfs: the group must not be able to send its output elsewhere by
// putting a link there. The file is made in the background, and what is
// written before it exists is held and written first: creating a file
// costs the kernel a search for a free inode (measured on this ext4,
// which has no journal and so passes over every inode freed in the last
// minute: 0.06 ms when few were, 0.5–1 ms amid the runs' own churn),
// which the agent's start does not need to wait for. Made tells how it
// went.
func openRunLog(ctx context.Context, dir string, max int64, rep security.Reporter) *runLog {
	l := &runLog{max: max, made: make(chan struct{})}
	go func() {
		f, path, err := createRunLog(ctx, dir, rep)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.f, l.path, l.err = f, path, err
		if f != nil {
			f.Write(l.held)
		}
		l.held = nil
		close(l.made)
	}()
	return l
}

func createRunLog(ctx context.Context, dir string, rep security.Reporter) (*os.File, string, error) {
	d, err := groupfs.OpenSub(ctx, dir, filepath.Base(filepath.Dir(dir)), 0o755, rep)
	if err != nil {
		return nil, "", fmt.Errorf("the run log directory: %w", err)
	}
	defer d.Close()
	for {
		path := logPath(dir)
		f, err := d.OpenFile(ctx, filepath.Base(path), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue // two runs in the same nanosecond
		}
		if err != nil {
			return nil, "", fmt.Errorf("creating the run log %s: %w", path, err)
		}
		return f, path, nil
	}
}

// Made waits until the file is made and returns why it could not be.
func (l *runLog) Made() error {
	<-l.made
	return l.err
}

func (l *runLog) write(s string, note bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := l.max
	if note {
		limit += logHeadroom
	}
	if l.n+int64(len(s)) > limit {
		if !l.full && !note {
			l.full = true
			s = fmt.Sprintf("%s runner: log reached %d bytes; further agent output is dropped\n", stamp(), l.max)
			l.n += int64(len(s))
			l.put(s)
		}
		return
	}
	l.n += int64(len(s))
	l.put(s)
}

// put writes s to the file, or holds it until the file is made. Called
// with mu held.
func (l *runLog) put(s string) {
	switch {
	case l.f != nil:
		l.f.WriteString(s)
	case l.err == nil:
		l.held = append(l.held, s...)
	}
}

// Printf logs a note of the runner's own.
func (l *runLog) Printf(format string, args ...any) {
	l.write(stamp()+" runner: "+fmt.Sprintf(format, args...)+"\n", true)
}

// Line logs one line of agent output.
func (l *runLog) Line(stream string, line []byte, cut bool) {
	var b strings.Builder
	b.Grow(len(line) + 40)
	b.WriteString(stamp())
	b.WriteByte(' ')
	b.WriteString(stream)
	b.WriteString(": ")
	b.Write(line)
	if cut {
		fmt.Fprintf(&b, " [line cut at %d bytes]", len(line))
	}
	b.WriteByte('\n')
	l.write(b.String(), false)
}

func (l *runLog) Close() error {
	if l.Made() != nil {
		return nil
	}
	return l.f.Close()
}

func stamp() string { return time.Now().UTC().Format("15:04:05.000") }

// tail keeps the last bytes of stderr for the error of a failed run.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, line...)
	t.buf = append(t.buf, '\n')
	if len(t.buf) > 2*t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.n {
		b = b[len(b)-t.n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}
