package e2e_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	dto "github.com/prometheus/client_model/go"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// ScreenshotEnv, set to a directory, makes TestConsoleInABrowser save its
// screenshots there: console.png (the overview), console-group.png and
// console-usage.png (docs/ has them so).
const ScreenshotEnv = "NANOCLAWD_CONSOLE_SCREENSHOTS"

// The owner's console, from outside: nothing without a session (also
// from loopback), a login URL that works once, in a real headless
// Chromium: every group and the spend chart, a pause through the page
// that holds the group's next message and is audited as the chat's
// /pause, a violation that appears without a reload; POSTs without the
// console's Origin or CSRF token refused; pages as an owner reads them
// (cents, one time format, sentences, the live column after a reload, the
// policy as a table); /metrics only with its token, in Prometheus text.
// console_session_e2e_test.go attacks the session.
func TestConsoleInABrowser(t *testing.T) {
	// Agents that call a mock model API through the relay, so work has
	// spent something by the time the owner looks.
	mock := mockapi.New(t)
	mock.SetUsage(mockUsage)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "60s", "idleTimeout": "60s",
			"env": ["ANTHROPIC_API_KEY"], "budget": {"daily": 1}`,
		Top:      `"console": {"listen": "127.0.0.1:0", "metricsToken": "m-token"}, ` + priceConfig,
		Env:      []string{"ANTHROPIC_API_KEY=sk-ant-test-" + randHex(t), "ANTHROPIC_BASE_URL=" + mock.URL},
		Deadline: time.Now().Add(4 * time.Minute)})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.AddGroup("local:work", "work", "--no-trigger")
	in.Start()
	in.Post("local:work", "Bob", "api 2")
	in.WaitFor("local:work", func(s string) bool { return strings.HasPrefix(s, "api 2 ok") })
	// Some turns cost a fraction of a cent, which the console shows.
	in.Post("local:family", "Eve", "api 1")
	in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })

	login := strings.TrimSpace(in.CLI("console", "--url"))
	if !regexp.MustCompile(`^http://nanoclawd\.localhost:\d+/login\?token=[A-Za-z0-9_-]{40,}$`).MatchString(login) {
		t.Fatalf("console --url printed %q", login)
	}
	u, _ := url.Parse(login)
	origin := u.Scheme + "://" + u.Host
	byAddr := "http://127.0.0.1:" + u.Port() // Prometheus scrapes the address
	anon := localClient()

	t.Run("nothing without a session", func(t *testing.T) {
		for _, p := range []string{"/", "/groups/family", "/usage", "/violations", "/events", "/assets/console.js", "/metrics"} {
			resp, err := anon.Get(origin + p)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 && resp.StatusCode != 403 {
				t.Errorf("GET %s without a session: %d", p, resp.StatusCode)
			}
			if strings.Contains(string(b), "family") {
				t.Errorf("GET %s without a session shows a group: %s", p, b)
			}
		}
		resp, err := anon.Post(origin+"/api/groups/family/pause", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Errorf("POST pause without a session: %d", resp.StatusCode)
		}
	})

	ctx := chromium(t, 3*time.Minute)
	wait := chromedp.WithPollingTimeout(90 * time.Second)

	if err := chromedp.Do(ctx, chromedp.Navigate(login), chromedp.WaitVisible("#groups")); err != nil {
		t.Fatal(err)
	}
	table, err := chromedp.Run(ctx, chromedp.Text("#groups"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"main", "family", "work"} {
		if !strings.Contains(table, g) {
			t.Errorf("the overview does not list group %s:\n%s", g, table)
		}
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart").length`)); err != nil || n == 0 {
		t.Errorf("the overview has no spend chart (%d, %v)", n, err)
	}
	// work's spend today is a bar of the chart, and its line says it
	// against its budget.
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("svg.chart rect title")].map(t => t.textContent).join("\n")`))
	if err != nil || !strings.Contains(bars, "work ") || !strings.Contains(bars, "$0.02") || !strings.Contains(bars, "0.81¢") {
		t.Errorf("the chart has no bar of work's $0.02 and family's 0.81¢: %q %v", bars, err)
	}
	// The axis reads real values: cents up to the round value above work's bar.
	if axis, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("svg.chart text[data-axis]")].map(t => t.textContent).join(" ")`)); err != nil || axis != "2.5¢ 1.25¢ 0¢" {
		t.Errorf("the spend axis reads %q, want 2.5¢ 1.25¢ 0¢ (%v)", axis, err)
	}
	if !strings.Contains(table, "$0.02 of $1.00") || !strings.Contains(table, "0.81¢ of $1.00") {
		t.Errorf("the overview does not show work's and family's spend against their budget:\n%s", table)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("live").textContent === "live"`, wait)); err != nil {
		t.Fatalf("the page's event stream did not open: %v", err)
	}

	t.Run("the URL works once", func(t *testing.T) {
		resp, err := anon.Get(login)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("the used login URL answered %d, want 403", resp.StatusCode)
		}
	})

	t.Run("a POST needs the Origin and the CSRF token", func(t *testing.T) {
		c, csrf := consoleClient(t, in)
		for _, h := range []map[string]string{
			{},                                // neither
			{"X-CSRF-Token": csrf},            // no Origin
			{"Origin": "http://evil.example"}, // another site's
			{"Origin": origin},                // no token
			{"Origin": origin, "X-CSRF-Token": "x" + csrf}, // a wrong one
		} {
			req, _ := http.NewRequest("POST", origin+"/api/groups/work/pause", strings.NewReader("{}"))
			for k, v := range h {
				req.Header.Set(k, v)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 403 {
				t.Errorf("POST pause with %v: %d, want 403", h, resp.StatusCode)
			}
		}
		var st struct {
			Groups []struct{ Folder, Agent string }
		}
		if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for _, g := range st.Groups {
			if g.Agent == "paused" {
				t.Errorf("a refused POST paused %s", g.Folder)
			}
		}
	})

	t.Run("each action answers as its chat command does", func(t *testing.T) {
		c, csrf := consoleClient(t, in)
		post := func(path, body string) (int, string) {
			req, _ := http.NewRequest("POST", origin+path, strings.NewReader(body))
			req.Header.Set("Origin", origin)
			req.Header.Set("X-CSRF-Token", csrf)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var a struct{ Message string }
			json.NewDecoder(resp.Body).Decode(&a)
			return resp.StatusCode, a.Message
		}
		for _, c := range []struct {
			path, body string
			code       int
			starts     string
		}{
			{"/api/allow", `{"code": "ZZZ"}`, 200, "There is no code ZZZ: nothing changed."},
			{"/api/undo", ``, 200, "Nothing to undo"},
			{"/api/groups/work/reset-session", ``, 200, "work has no saved session"},
			{"/api/groups/nosuch/pause", ``, 404, "No group nosuch"},
			{"/api/groups/work/model", `{"model": "claude-haiku-4-5"}`, 200, "work now uses claude-haiku-4-5"},
			{"/api/groups/work/model", `{"model": "no-such-model"}`, 200, "Not set:"},
			{"/api/tasks/nosuch/run", ``, 200, "No task nosuch"},
		} {
			if code, msg := post(c.path, c.body); code != c.code || !strings.HasPrefix(msg, c.starts) {
				t.Errorf("POST %s %s: %d %q, want %d %q…", c.path, c.body, code, msg, c.code, c.starts)
			}
		}
		if v := in.CLI("violations", "--group", "work"); !strings.Contains(v, "session-reset-by-owner") {
			t.Errorf("the session reset is not in the audit trail:\n%s", v)
		}
	})

	// Pause family through the page: the page says so, its state turns
	// to paused, its next message waits, and the audit trail has it as
	// the chat's /pause has it.
	if err := chromedp.Do(ctx, chromedp.Click(`button[data-post="/api/groups/family/pause"]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("notice").textContent.startsWith("Paused family")`, wait)); err != nil {
		notice, _ := chromedp.Run(ctx, chromedp.Text("#notice"))
		t.Fatalf("the page did not say family was paused: %v (notice %q)", err, notice)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector('[data-state-of="family"]').textContent === "paused"`, wait)); err != nil {
		t.Errorf("the overview did not show family paused without a reload: %v", err)
	}
	if v := in.CLI("violations", "--group", "family"); !strings.Contains(v, "paused-by-owner") {
		t.Errorf("the pause is not in the audit trail:\n%s", v)
	}
	in.Post("local:family", "Eve", "echo kept for later")
	held := func() bool {
		b, _ := os.ReadFile(in.Layout().DaemonLog())
		return strings.Contains(string(b), "group paused by the owner")
	}
	for deadline := time.Now().Add(60 * time.Second); !held(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the paused group's message was not held")
		}
	}

	// A violation of work arrives on the open page.
	in.Post("local:work", "Bob", "violation network evil.example.com")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`[...document.querySelectorAll("#events li.violation")].some(li => li.textContent.includes("evil.example.com"))`, wait)); err != nil {
		t.Fatalf("the violation did not appear live: %v", err)
	}
	for _, s := range e2e.InChat(in.AllSent(), "local:family") {
		if strings.Contains(s, "kept for later") {
			t.Fatalf("family answered while paused: %q", s)
		}
	}

	t.Run("group, usage and violations pages", func(t *testing.T) {
		c, _ := consoleClient(t, in)
		get := func(p string) string {
			resp, err := c.Get(origin + p)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !strings.Contains(string(b), `<meta name="csrf-token" content="`) {
				t.Errorf("GET %s: %d, or no csrf-token meta:\n%s", p, resp.StatusCode, b)
			}
			return string(b)
		}
		page := get("/groups/work")
		for _, want := range []string{"violation network evil.example.com", "evil.example.com", "violation reported"} {
			if !strings.Contains(html.UnescapeString(page), want) {
				t.Errorf("the group page of work does not show %q", want)
			}
		}
		// Its policy reads as a table of what it may read, write and
		// reach, and behind a disclosure is what security show prints
		// (less the sandbox plan).
		for _, want := range []string{"<th>May read</th>", "<th>May write</th>", "<th>May reach</th>", "no network", "<details>"} {
			if !strings.Contains(page, want) {
				t.Errorf("the group page's policy table lacks %q", want)
			}
		}
		m := regexp.MustCompile(`(?s)<details>.*<pre>(.*)</pre>`).FindStringSubmatch(page)
		var shown, cli map[string]any
		if m == nil || json.Unmarshal([]byte(html.UnescapeString(m[1])), &shown) != nil {
			t.Fatalf("no policy on the group page:\n%s", page)
		}
		if err := json.Unmarshal([]byte(in.CLI("security", "show", "work", "--json")), &cli); err != nil {
			t.Fatal(err)
		}
		delete(cli, "confinement")
		if !reflect.DeepEqual(shown, cli) {
			t.Errorf("the group page's policy differs from security show:\n%v\n%v", shown, cli)
		}
		if u := get("/usage"); strings.Count(u, `<svg class="chart"`) != 2 || !strings.Contains(u, "<th>Provider</th>") ||
			!strings.Contains(u, "<td>work</td><td>anthropic</td><td>claude-sonnet-4-5") {
			t.Errorf("the usage page has not its two charts and its rows by provider and model:\n%s", u)
		}
		if v := get("/violations"); !strings.Contains(v, "evil.example.com") || !strings.Contains(v, "paused-by-owner") {
			t.Errorf("the violations page lacks the violation or the pause:\n%s", v)
		}
	})

	// After a reload the live column still shows what happened, newest
	// first, in the one time format (24 h, no AM/PM anywhere).
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible("#groups")); err != nil {
		t.Fatal(err)
	}
	lines, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#events li")].map(li => li.textContent)`))
	if err != nil || len(lines) == 0 || len(lines) > 20 || !strings.Contains(strings.Join(lines, "\n"), "evil.example.com") {
		t.Errorf("the live column after a reload: %q %v", lines, err)
	}
	for _, l := range lines {
		if !regexp.MustCompile(`^[A-Z][a-z]{2} \d{1,2} \d{2}:\d{2}:\d{2} `).MatchString(l) {
			t.Errorf("a live line does not start with the time: %q", l)
		}
		if strings.Contains(l, "network network") {
			t.Errorf("a violation does not read as a sentence: %q", l)
		}
	}
	screenshot(t, ctx, "console.png")
	for _, p := range []struct{ path, file string }{{"/groups/work", "console-group.png"}, {"/usage", "console-usage.png"}} {
		if err := chromedp.Do(ctx, chromedp.Navigate(origin+p.path), chromedp.WaitVisible("#events")); err != nil {
			t.Fatal(err)
		}
		if s := bodyText(t, ctx); regexp.MustCompile(`\d (AM|PM)\b`).MatchString(s) {
			t.Errorf("%s shows a 12-hour time:\n%s", p.path, s)
		}
		screenshot(t, ctx, p.file)
	}

	t.Run("metrics", func(t *testing.T) {
		req, _ := http.NewRequest("GET", byAddr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Errorf("/metrics with a wrong token: %d", resp.StatusCode)
		}
		families := e2e.Metrics(t, byAddr, "m-token")
		for _, name := range []string{"nanoclawd_messages_received_total", "nanoclawd_messages_sent_total", "nanoclawd_runs_total",
			"nanoclawd_violations_total", "nanoclawd_model_cost_usd_total", "nanoclawd_run_duration_seconds",
			"nanoclawd_inbound_to_agent_start_seconds", "nanoclawd_ipc_files_total", "nanoclawd_outbox_backlog",
			"nanoclawd_standby_agents", "nanoclawd_channel_connected", "nanoclawd_model_api_problem", "nanoclawd_model_tokens_total"} {
			if families[name] == nil {
				t.Errorf("/metrics has no %s", name)
			}
		}
		if f := families["nanoclawd_model_cost_usd_total"]; f == nil || !hasSample(f, map[string]string{"group": "work"}, 2*requestCost) {
			t.Errorf("nanoclawd_model_cost_usd_total has not work's $%g: %v", 2*requestCost, f)
		}
		if f := families["nanoclawd_runs_total"]; f == nil || !hasSample(f, map[string]string{"outcome": "ok"}, -1) {
			t.Errorf("nanoclawd_runs_total counts no run: %v", f)
		}
		if f := families["nanoclawd_violations_total"]; f != nil {
			found := false
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetValue() == "network" && m.Counter.GetValue() >= 1 {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("nanoclawd_violations_total has no network violation: %v", f)
			}
		}
	})

	// A new console.metricsToken applies at the config's reload, without
	// a restart: the old one is refused, the new one answered.
	t.Run("metrics token reloads", func(t *testing.T) {
		b, err := os.ReadFile(in.Config)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(in.Config, []byte(strings.Replace(string(b), `"m-token"`, `"m-token-2"`, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		scrape := func(token string) int {
			req, _ := http.NewRequest("GET", byAddr+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for deadline := time.Now().Add(60 * time.Second); scrape("m-token-2") != 200; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the new metrics token was not taken at the reload")
			}
		}
		if code := scrape("m-token"); code != 403 {
			t.Errorf("the old metrics token after the reload: %d, want 403", code)
		}
		var st struct{ PendingRestart []string }
		if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &st); err != nil || len(st.PendingRestart) != 0 {
			t.Errorf("status says a restart is pending for %v (%v)", st.PendingRestart, err)
		}
	})
}

// hasSample tells whether f has a sample with labels whose value is
// want (any value above 0 for -1).
func hasSample(f *dto.MetricFamily, labels map[string]string, want float64) bool {
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && got[k] == v
		}
		v := m.GetCounter().GetValue()
		if match && ((want < 0 && v > 0) || math.Abs(v-want) < 1e-9) {
			return true
		}
	}
	return false
}

// screenshot saves the page as name in $NANOCLAWD_CONSOLE_SCREENSHOTS.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil || !strings.HasPrefix(string(shot), "\x89PNG") {
		t.Errorf("screenshot: %v", err)
	} else if dir := os.Getenv(ScreenshotEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// consoleClient logs a plain HTTP client in with a fresh login URL and
// returns it with its session's CSRF token.
func consoleClient(t *testing.T, in *e2e.Install) (*http.Client, string) {
	t.Helper()
	c := localClient()
	resp, err := c.Get(strings.TrimSpace(in.CLI("console", "--url")))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindSubmatch(b)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("logging in: %d\n%s", resp.StatusCode, b)
	}
	return c, string(m[1])
}
