package confine

import (
	"net"
	"sync"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// Sockets makes the gateway socket of a daemon's next confined run ahead
// of it. Binding a Unix socket creates a file, and creating a file on the
// ext4 here cost half a millisecond of every confined start (measured:
// 94 % of opening the gateway was the kernel looking past each inode freed
// in the last minute for a free one — and every run frees some). So
// each run takes the socket made while the previous one started, and the
// next is bound in the background. The zero Sockets is ready; a nil one
// makes each socket when it is needed (the CLI's `security test`).
type Sockets struct {
	mu     sync.Mutex
	spare  *spareSocket
	making sync.WaitGroup
}

// spareSocket is a bound socket not yet given to a run.
type spareSocket struct {
	dir  string
	user sandbox.User
	path string
	ln   net.Listener
}

// take returns a socket for a run's gateway in dir, which user's sandbox
// reaches: the spare if it was made for them, else a new one.
func (s *Sockets) take(dir string, user sandbox.User) (string, net.Listener, error) {
	if s == nil {
		return newSocket(dir, user)
	}
	s.mu.Lock()
	sp := s.spare
	s.spare = nil
	s.mu.Unlock()
	if sp != nil && (sp.dir != dir || sp.user != user) {
		sp.ln.Close() // made before a config change
		sp = nil
	}
	s.making.Add(1)
	go s.makeSpare(dir, user)
	if sp != nil {
		return sp.path, sp.ln, nil
	}
	return newSocket(dir, user)
}

func (s *Sockets) makeSpare(dir string, user sandbox.User) {
	defer s.making.Done()
	path, ln, err := newSocket(dir, user)
	if err != nil {
		return // the next run makes its own, and says why if it cannot
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare != nil {
		ln.Close()
		return
	}
	s.spare = &spareSocket{dir: dir, user: user, path: path, ln: ln}
}

// Close removes the spare socket, once a spare being made is there; call
// it when no run starts any more.
func (s *Sockets) Close() {
	if s == nil {
		return
	}
	s.making.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spare != nil {
		s.spare.ln.Close() // which removes its file
		s.spare = nil
	}
}

// newSocket binds a fresh gateway socket in dir (gateway.Listen).
func newSocket(dir string, user sandbox.User) (string, net.Listener, error) {
	path, err := gatewaySocket(dir, user)
	if err != nil {
		return "", nil, err
	}
	ln, err := gateway.Listen(path)
	if err != nil {
		return "", nil, err
	}
	return path, ln, nil
}
