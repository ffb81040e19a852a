// Command hostileagent is an attacker standing in for an agent, with no
// SDK in between: it speaks just enough of the agent protocol (package protocol)
// to be started and to answer, and spends its run trying to read, write and
// reach what a confined group must not. Everything it gets hold of goes
// into its reply, so a test finds any canary that escaped by looking at
// what the daemon sends out.
//
// Environment (from agent.env):
//
//	HOSTILE_READ    paths to read, one per line (directories are walked)
//	HOSTILE_WRITE   paths to create, one per line
//	HOSTILE_DIAL    host:port of a listener on the host's loopback, tried
//	                directly and through $HTTPS_PROXY (CONNECT)
//	HOSTILE_FORKS   start this many sleeping children (reports how many it got)
//	HOSTILE_BIGFILE write one file of this many MiB in /tmp (reports how far it got)
//	HOSTILE_FILL    write this many 1 MiB files into its folder, then wait to be stopped
//	HOSTILE_MEM     hold this many MiB of memory, then wait to be stopped
//	HOSTILE_DISK    "folder N", "home N" or "unlinked N": fill the disk, also where a walk of its folder misses it (exhaust.go)
//	HOSTILE_FLOOD   write this many IPC files with a bad token, each named differently (exhaust.go)
//	HOSTILE_LINK    when the prompt says "plant links": lines "PATH TARGET";
//	                each PATH ($NANOCLAW_* expanded) is replaced by a symlink
//	                to TARGET, then a message request is written in messages/
//	                (its text "linked"), which makes the daemon answer in
//	                results/
//	HOSTILE_SEND    files to send to its own chat, one per line: each
//	                becomes a message request (text "sending FILE") with
//	                that file, for the daemon to read and send
//	HOSTILE_PAD     make this many empty files under pad/ in its folder
//	                (to exhaust a walk of it before the next run)
//	HOSTILE_MEMFD   hold this many MiB in a memfd, then wait to be stopped
//	HOSTILE_ESCAPE  a command line: try to leave something behind that runs
//	                as someone else, and to widen the kernel surface (escape.go)
//	HOSTILE_API     Messages request bodies, one per line, sent through the
//	                model-API relay with the run's placeholder (api.go)
package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

const (
	perFile = 4 << 10   // bytes kept of one file
	total   = 600 << 10 // bytes of reply at most
)

func main() {
	input, _ := io.ReadAll(os.Stdin)
	var b strings.Builder
	say := func(format string, args ...any) {
		if b.Len() < total {
			fmt.Fprintf(&b, format+"\n", args...)
		}
	}
	id, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(id), "\n") {
		if strings.HasPrefix(l, "Uid:") || strings.HasPrefix(l, "CapEff:") {
			say("SELF %s", l)
		}
	}
	if strings.Contains(string(input), "plant links") {
		// First, so that the report's size cap never cuts these lines.
		plantLinks(lines(os.Getenv("HOSTILE_LINK")), say)
	}
	if bodies := lines(os.Getenv("HOSTILE_API")); len(bodies) > 0 {
		askAPI(bodies, say) // before the reads, which may fill the report
	}
	say("ENV %s", strings.Join(os.Environ(), " "))
	targets := lines(os.Getenv("HOSTILE_READ"))
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	targets = append(append(append(targets, procs...), cmdlines...), "/etc/shadow")
	for _, t := range targets {
		readAll(t, say)
	}
	for _, w := range lines(os.Getenv("HOSTILE_WRITE")) {
		if err := os.WriteFile(w, []byte("written by a confined agent\n"), 0o644); err != nil {
			say("WRITE %s: refused: %v", w, err)
		} else {
			say("WRITE %s: ok", w)
		}
	}
	if addr := os.Getenv("HOSTILE_DIAL"); addr != "" {
		dial(addr, say)
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_PAD")); n > 0 {
		made, err := pad(n)
		say("PAD %d of %d: %v", made, n, err)
	}
	if files := lines(os.Getenv("HOSTILE_SEND")); len(files) > 0 {
		say("SEND %v", send(files))
	}
	if c := os.Getenv("HOSTILE_ESCAPE"); c != "" {
		escape(c, say)
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_FORKS")); n > 0 {
		got := forks(n)
		say("FORKS %d of %d", got, n)
		if got == n { // no kernel limit: wait for the daemon to stop us
			frame(b.String())
			time.Sleep(time.Minute)
		}
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_BIGFILE")); n > 0 {
		got, err := fill(filepath.Join(os.TempDir(), "big"), n)
		say("BIGFILE %d of %d MiB: %v", got, n, err)
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_FILL")); n > 0 {
		var err error
		got := 0
		for ; got < n && err == nil; got++ {
			_, err = fill(fmt.Sprintf("fill-%d.bin", got), 1)
		}
		say("FILL %d of %d MiB: %v", got, n, err)
		frame(b.String())
		time.Sleep(time.Minute) // the daemon is to stop us before this ends
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_MEMFD")); n > 0 {
		got, err := holdMemfd(n)
		say("MEMFD holding %d of %d MiB: %v", got, n, err)
		frame(b.String())
		time.Sleep(time.Minute) // the daemon is to stop us before this ends
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_FLOOD")); n > 0 {
		flood(n, say)
	}
	if fillDisk(os.Getenv("HOSTILE_DISK"), string(input), say) {
		frame(b.String())
		holdOn()
	}
	if n, _ := strconv.Atoi(os.Getenv("HOSTILE_MEM")); n > 0 {
		hold := make([]byte, n<<20)
		for i := range hold {
			hold[i] = byte(i)
		}
		say("MEM holding %d MiB", n)
		frame(b.String())
		time.Sleep(time.Minute)
		hold[0]++
	}
	frame(b.String())
}

// plantLinks replaces each "PATH TARGET" path with a link to TARGET, where
// the daemon keeps a directory or file of its own, then asks the daemon
// to send a message, so that it writes its verdict in results/.
func plantLinks(specs []string, say func(string, ...any)) {
	for _, spec := range specs {
		path, target, _ := strings.Cut(os.ExpandEnv(spec), " ")
		// The daemon may put a real directory back at once: take it away
		// again, as a determined attacker would.
		var err error
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if rerr := os.RemoveAll(path); rerr != nil {
				err = rerr
			} else if err = os.Symlink(target, path); err == nil {
				break
			}
			// Let the daemon finish putting it back, then take it away again.
			time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
		}
		if err != nil {
			say("LINK %s: refused: %v", path, err)
		} else {
			say("LINK %s: ok", path)
		}
	}
	ipc := os.Getenv(protocol.EnvIPCDir)
	req := fmt.Sprintf(`{"type":"message","chatJid":%q,"text":"linked","token":%q}`, os.Getenv(protocol.EnvChatJID), os.Getenv(protocol.EnvIPCToken))
	tmp := filepath.Join(ipc, "messages", "linked.json.tmp")
	err := os.WriteFile(tmp, []byte(req), 0o644)
	if err == nil {
		err = os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp"))
	}
	say("REQUEST: %v", err)
}

// send asks the daemon to send each file to the run's own chat.
func send(files []string) error {
	ipc := os.Getenv(protocol.EnvIPCDir)
	for i, f := range files {
		req := fmt.Sprintf(`{"type":"message","chatJid":%q,"text":%q,"file":%q,"token":%q}`,
			os.Getenv(protocol.EnvChatJID), "sending "+f, f, os.Getenv(protocol.EnvIPCToken))
		tmp := filepath.Join(ipc, "messages", fmt.Sprintf("send-%d-%d.json.tmp", time.Now().UnixNano(), i))
		if err := os.WriteFile(tmp, []byte(req), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
			return err
		}
	}
	return nil
}

// pad makes n empty files under pad/, 1,000 to a directory.
func pad(n int) (int, error) {
	for i := 0; i < n; i++ {
		dir := filepath.Join("pad", strconv.Itoa(i/1000))
		if i%1000 == 0 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return i, err
			}
		}
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			return i, err
		}
		f.Close()
	}
	return n, nil
}

// forks starts up to n children that sleep until the run ends.
func forks(n int) int {
	got := 0
	for i := 0; i < n; i++ {
		if err := exec.Command("/bin/sleep", "300").Start(); err != nil {
			break
		}
		got++
	}
	return got
}

// fill writes up to mib MiB to path; it returns how many it wrote.
func fill(path string, mib int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := 0; i < mib; i++ {
		if _, err := f.Write(chunk); err != nil {
			return i, err
		}
	}
	return mib, nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func readAll(root string, say func(string, ...any)) {
	fi, err := os.Stat(root)
	if err != nil {
		say("READ %s: refused: %v", root, err)
		return
	}
	if !fi.IsDir() {
		readFile(root, say)
		return
	}
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			say("READ %s: refused: %v", p, err)
			return nil
		}
		if n++; n > 200 {
			return filepath.SkipAll
		}
		if !d.IsDir() {
			readFile(p, say)
		}
		return nil
	})
}

func readFile(p string, say func(string, ...any)) {
	f, err := os.Open(p)
	if err != nil {
		say("READ %s: refused: %v", p, err)
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, perFile))
	if err != nil {
		say("READ %s: refused: %v", p, err)
		return
	}
	say("READ %s: ok: %q", p, strings.ReplaceAll(string(data), "\x00", " "))
}

func dial(addr string, say func(string, ...any)) {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		say("DIAL %s: refused: %v", addr, err)
	} else {
		fmt.Fprintf(c, "hello from a confined agent\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		say("DIAL %s: ok: %q", addr, line)
		c.Close()
	}
	proxy := os.Getenv("HTTPS_PROXY")
	if proxy == "" {
		say("PROXY: none offered")
		return
	}
	u, err := url.Parse(proxy)
	if err != nil {
		say("PROXY %s: %v", proxy, err)
		return
	}
	pc, err := net.DialTimeout("tcp", u.Host, 3*time.Second)
	if err != nil {
		say("PROXY %s: refused: %v", proxy, err)
		return
	}
	defer pc.Close()
	fmt.Fprintf(pc, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	resp, err := http.ReadResponse(bufio.NewReader(pc), nil)
	if err != nil {
		say("PROXY CONNECT %s: %v", addr, err)
		return
	}
	say("PROXY CONNECT %s: %s", addr, resp.Status)
}

func frame(text string) { protocol.WriteFrame(os.Stdout, protocol.Result(text)) }
