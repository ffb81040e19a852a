package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// chromium is a tab of Debian's headless Chromium, for at most d. It
// resolves every name under .localhost (the console's nanoclawd.localhost)
// to loopback by itself: no flag, no DNS.
func chromium(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil && runtime.GOOS == "darwin" {
		// A Mac has no Debian chromium; the macOS runners have Chrome.
		path = "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"
		if _, err := os.Stat(path); err != nil {
			t.Skip("needs a Chrome on a Mac: install Google Chrome")
		}
	} else if err != nil {
		t.Fatal("this test drives Debian's chromium: run 'apt-get install chromium' (make deps says so)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 1000))
	if os.Geteuid() == 0 {
		// Chromium's own sandbox needs user namespaces it will not use as
		// root; the pages it shows here are the test's own.
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// Every wait of the test ends by then, so a hang fails, not stalls.
	ctx, cancelT := context.WithTimeout(ctx, d)
	t.Cleanup(cancelT)
	return ctx
}

// localClient is an HTTP client as a browser is to the console: a cookie
// jar, and names under .localhost dialled on loopback (Go's resolver asks
// DNS for them, which knows none).
func localClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h, port, _ := net.SplitHostPort(addr); strings.HasSuffix(h, ".localhost") {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
}

// bodyText is the visible text of the browser's page.
func bodyText(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The console's session as an attacker on the same machine meets it, in
// a real Chromium: a server on another port of 127.0.0.1 (any local dev
// server the owner opens) never receives the session cookie; its page's
// 20 hits on /login leave a fresh login URL working; the login URL on
// 127.0.0.1 lands on the console's own name; logout ends the session.
func TestConsoleSessionInABrowser(t *testing.T) {
	in := e2e.New(t, e2e.Options{Deadline: time.Now().Add(3 * time.Minute)})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	login := strings.TrimSpace(in.CLI("console", "--url"))
	if !regexp.MustCompile(`^http://nanoclawd\.localhost:\d+/login\?token=[A-Za-z0-9_-]{40,}$`).MatchString(login) {
		t.Fatalf("console --url printed %q, want a URL on nanoclawd.localhost", login)
	}
	origin := login[:strings.Index(login, "/login")]

	// Another local server, and everything it is sent.
	var mu sync.Mutex
	var cookies []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		cookies = append(cookies, r.Header.Get("Cookie"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>another app</title><p>another app</p>")
		for i := range 20 {
			fmt.Fprintf(w, `<img src="%s/login?token=guess%d">`, origin, i)
		}
	}))
	defer other.Close()

	ctx := chromium(t, 2*time.Minute)
	// The URL as the owner might type it, on 127.0.0.1: it goes to the
	// console's name, and logs in there.
	byAddr := strings.Replace(login, "nanoclawd.localhost", "127.0.0.1", 1)
	if err := chromedp.Do(ctx, chromedp.Navigate(byAddr), chromedp.WaitVisible("#groups")); err != nil {
		t.Fatalf("the login URL on 127.0.0.1: %v\n%s", err, bodyText(t, ctx))
	}
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != origin+"/" {
		t.Errorf("after login the browser is at %s, want %s/", loc, origin)
	}

	t.Run("another port never gets the cookie", func(t *testing.T) {
		otherPort := other.URL[strings.LastIndex(other.URL, ":")+1:]
		for _, u := range []string{other.URL + "/", "http://localhost:" + otherPort + "/"} {
			if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(cookies) < 2 {
			t.Fatalf("the other server saw %d requests", len(cookies))
		}
		for _, c := range cookies {
			if strings.Contains(c, "nanoclawd") {
				t.Errorf("a server on another port received the console's cookie: %q", c)
			}
		}
	})

	t.Run("20 cross-site logins leave a fresh URL working", func(t *testing.T) {
		// The other page's 20 <img> hits on /login were loaded with it.
		fresh := strings.TrimSpace(in.CLI("console", "--url"))
		if err := chromedp.Do(ctx, chromedp.Navigate(fresh), chromedp.WaitVisible("#groups")); err != nil {
			t.Fatalf("a fresh login URL after 20 refused logins: %v\n%s", err, bodyText(t, ctx))
		}
		b, _ := os.ReadFile(in.Layout().DaemonLog())
		if n := strings.Count(string(b), "a login was refused"); n == 0 || n > 10 {
			t.Errorf("the log has %d refused logins, want 1..10 (the rest answered 429 unlogged)", n)
		}
	})

	t.Run("the overview shows Pause or Resume, never both", func(t *testing.T) {
		row := func() string {
			s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('tr[data-group="family"] button')].map(b => b.textContent).join(",")`))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		if got := row(); got != "Pause" {
			t.Fatalf("family running: buttons %q, want Pause", got)
		}
		if err := chromedp.Do(ctx, chromedp.Click(`tr[data-group="family"] button`)); err != nil {
			t.Fatal(err)
		}
		wait := chromedp.WithPollingTimeout(60 * time.Second)
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('tr[data-group="family"] button').textContent === "Resume"`, wait)); err != nil {
			t.Fatalf("after the pause: buttons %q (%v)", row(), err)
		}
		if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible("#groups")); err != nil {
			t.Fatal(err)
		}
		if got := row(); got != "Resume" {
			t.Errorf("family paused, after a reload: buttons %q, want Resume", got)
		}
	})

	t.Run("the login page nanoclawd console opens", func(t *testing.T) {
		// What 'nanoclawd console' hands the browser: a private file,
		// never the URL. Opened from a file, the console asks once.
		file := consoleLoginPage(t, in)
		if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file), chromedp.WaitVisible(`form[action="/login"] button`)); err != nil {
			t.Fatalf("the login page: %v\n%s", err, bodyText(t, ctx))
		}
		if err := chromedp.Do(ctx, chromedp.Click(`form[action="/login"] button`), chromedp.WaitVisible("#groups")); err != nil {
			t.Fatalf("logging in from the page: %v\n%s", err, bodyText(t, ctx))
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("the login page is still there after its login: %v", err)
		}
	})

	t.Run("logout ends the session", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/violations"), chromedp.WaitVisible("#events")); err != nil {
			t.Fatal(err)
		}
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(`form.logout button`))
		if err != nil || resp.Status != 200 || !strings.HasPrefix(bodyText(t, ctx), "Logged out") {
			t.Fatalf("after Log out: %v %q", err, bodyText(t, ctx))
		}
		for _, p := range []string{"/", "/groups/family", "/events"} {
			if err := chromedp.Do(ctx, chromedp.Navigate(origin+p)); err != nil {
				t.Fatal(err)
			}
			if s := bodyText(t, ctx); strings.Contains(s, "family") || !strings.Contains(s, "log") {
				t.Errorf("%s after logout shows %q", p, s)
			}
		}
	})
}

// consoleLoginPage runs 'nanoclawd console' on a desktop whose browser
// opener (xdg-open) writes down what it was given, and returns the file
// it was given: private to the owner, and no token on the command line.
func consoleLoginPage(t *testing.T, in *e2e.Install) string {
	t.Helper()
	bin := t.TempDir()
	argv := filepath.Join(bin, "argv")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argv + ".tmp && mv " + argv + ".tmp " + argv + "\n"
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(slices.Clone(in.Env), "DISPLAY=:0", "PATH="+bin+":"+os.Getenv("PATH"))
	out, errs, code := e2e.Run(t, "", env, "console", "--config", in.Config)
	if code != 0 {
		t.Fatalf("nanoclawd console: exit %d %s%s", code, out, errs)
	}
	token := out[strings.Index(out, "token=")+len("token="):]
	var args []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(argv); err == nil {
			args = strings.Fields(string(b))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nanoclawd console started no browser")
		}
	}
	if len(args) != 1 || strings.Contains(args[0], strings.TrimSpace(token)) || !strings.HasSuffix(args[0], ".html") {
		t.Fatalf("the browser was started with %q (the token is %q)", args, token)
	}
	fi, err := os.Stat(args[0])
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the login page %s: %v %v", args[0], fi, err)
	}
	return args[0]
}
