package e2e_test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// A console other machines could reach without TLS: the daemon does not
// start, and says why in one line.
func TestConsoleElsewhereNeedsTLS(t *testing.T) {
	in := e2e.New(t, e2e.Options{Top: `"console": {"listen": "0.0.0.0:7457"}`})
	out, errs, code := e2e.Run(t, "", in.Env, "run", "--config", in.Config)
	var lines []string
	for _, l := range strings.Split(out+errs, "\n") {
		if strings.Contains(l, "console.") {
			lines = append(lines, l)
		}
	}
	// The config's problem line (FILE:LINE:COL: …), then the count of problems.
	if code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "console.tls.cert") || !strings.Contains(lines[0], "127.0.0.1") {
		t.Fatalf("want one line naming console.tls.cert and the fix, and a non-zero exit; got exit %d:\n%s%s", code, out, errs)
	}
}

// A console port already taken: one line in the log, the daemon runs on
// (its chats answer), status says the console is not served, and
// 'nanoclawd console' says why.
func TestConsoleBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	in := e2e.New(t, e2e.Options{Top: `"console": {"listen": "` + busy.Addr().String() + `"}`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "echo still here")
	in.WaitFor("local:main", e2e.Equals("echo: still here"))
	var st struct{ Console struct{ URL, Error string } }
	if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Console.URL != "" || !strings.Contains(st.Console.Error, busy.Addr().String()) {
		t.Errorf("status --json says of the console %+v", st.Console)
	}
	if text := in.CLI("status"); !strings.Contains(text, "Console: not served") {
		t.Errorf("status does not say the console is not served:\n%s", text)
	}
	out, errs, code := e2e.Run(t, "", in.Env, "console", "--url", "--config", in.Config)
	if code == 0 || !strings.Contains(errs, "serves no console") {
		t.Errorf("console --url with no console: exit %d %s%s", code, out, errs)
	}
}
