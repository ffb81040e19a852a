package main

import (
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// While the daemon restarts, 'nanoclawd chat' says once that it is not
// reachable and once that it is back, not an error a second; a message to
// a chat no group has is answered by the hint to register it, and status
// lists the chat.
func TestChatCalmAcrossRestartAndUnregistered(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	chat := startProgram(t, "nanoclawd chat", in.Dir, in.Env, e2e.Nanoclawd(t), "chat", "--chat", "local:main", "--config", in.Config)
	chat.Expect("type a message and press Enter")
	p.Kill9()
	chat.Expect("daemon not reachable, retrying…")
	in.Start()
	chat.Expect("nanoclawd chat: back")
	chat.Type("echo still here")
	chat.Expect("Andy: echo: still here")
	out := chat.text()
	if n := strings.Count(out, "not reachable"); n != 1 {
		t.Errorf("said 'not reachable' %d times, want once:\n%s", n, out)
	}
	if strings.Contains(out, "dial unix") || strings.Contains(out, "connection refused") {
		t.Errorf("a raw Go error reached the terminal:\n%s", out)
	}

	nobody := startProgram(t, "nanoclawd chat (unregistered)", in.Dir, in.Env, e2e.Nanoclawd(t), "chat", "--chat", "local:nobody", "--config", in.Config)
	nobody.Expect("type a message and press Enter")
	for range 3 {
		nobody.Type("anyone?")
	}
	nobody.Expect("no group has local:nobody, so nothing answers it: register it with 'nanoclawd groups add --jid local:nobody")
	if n := strings.Count(nobody.text(), "no group has"); n != 1 {
		t.Errorf("the hint came %d times, want once", n)
	}
	for i := 0; ; i++ {
		st := in.CLI("status")
		if strings.Contains(st, "messages from unregistered chats: local:nobody ×3") {
			break
		}
		if i == 100 {
			t.Fatalf("status does not list the unregistered chat:\n%s", st)
		}
	}
}
