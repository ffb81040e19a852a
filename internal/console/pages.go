package console

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/setup"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

//go:embed assets
var assets embed.FS

// chartDays is how far back the spend charts go.
const chartDays = 30

// pages are the parsed page templates, parsed when the console first
// renders one: not at every start of the program (its CLI included), where
// they cost about a millisecond and 128 KB.
var pages = sync.OnceValue(func() map[string]*template.Template {
	pages := map[string]*template.Template{}
	funcs := template.FuncMap{
		"clock": func(t time.Time) string { return t.Format(timeLayout) }, // render: in the configured zone
		"since": func(a, b time.Time) string { return b.Sub(a).Round(time.Second).String() },
		"money": money,
		// toggle and rows hand the shared templates of layout.html their data.
		"toggle": func(folder, state string) map[string]string {
			return map[string]string{"Folder": folder, "State": state}
		},
		"rows": func(group string, rows []violationRow) any {
			return struct {
				Group string
				Rows  []violationRow
			}{group, rows}
		},
	}
	for _, p := range []string{"overview", "group", "usage", "violations"} {
		pages[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+p+".html"))
	}
	return pages
})

// render writes page p with data; the layout adds the CSRF token, the
// logout button and the live column's newest events.
func (s *Server) render(w http.ResponseWriter, r *http.Request, p, title string, data any) {
	t, err := pages()[p].Clone()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t.Funcs(template.FuncMap{"clock": s.clock})
	live, after := s.hub.page()
	var b strings.Builder
	err = t.ExecuteTemplate(&b, "layout", struct {
		Title, CSRF string
		Live        []event
		After       int64
		D           any
	}{title, sessionOf(r).csrf, live, after, data})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(b.String()))
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	s.o.Log.Error().Err(err).Str("path", r.URL.Path).Msg("console")
	plain(w, http.StatusInternalServerError, "The console could not show this: "+err.Error()+" (see the daemon's log)")
}

// asset serves an embedded file (the style sheet, the script).
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if path.Ext(name) == ".html" {
		http.NotFound(w, r)
		return
	}
	b, err := assets.ReadFile("assets/" + name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	w.Write(b)
}

// groupRow is a group as the overview lists it.
type groupRow struct {
	status.Group
	Channel, State, Model, Today, Month, LastMessage string
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rep, err := s.o.Status(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	chart, err := s.spendChart(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var rows []groupRow
	for _, g := range rep.Groups {
		row := groupRow{Group: g, Channel: setup.Network(g.JID), State: stateOf(g), Model: modelOf(g)}
		if u := g.Usage; u != nil {
			row.Today, row.Month = spendText(u.Today.CostUSD, u.Daily), spendText(u.Month.CostUSD, u.Monthly)
		}
		if last, err := s.o.Messages.Recent(ctx, g.JID, 1); err == nil && len(last) > 0 {
			row.LastMessage = s.clock(last[0].Time) + " " + last[0].SenderName + ": " + last[0].Text
		}
		rows = append(rows, row)
	}
	backup := "none recorded yet"
	if b := rep.LastBackup; b != nil {
		at := s.clock(b.Time)
		backup = fmt.Sprintf("%s: ok, %s (%d bytes)", at, b.Archive, b.Bytes)
		if !b.OK {
			backup = fmt.Sprintf("%s: FAILED: %s", at, b.Error)
		}
	}
	s.render(w, r, "overview", "Overview", struct {
		Chart         template.HTML
		Groups        []groupRow
		Channels      []status.Channel
		ModelAPI      any
		Backup, Proof string
	}{chart, rows, rep.Channels, rep.ModelAPI, backup, s.proofText()})
}

// stateOf is the state the console shows: idle, running, queued, standby
// or paused (a run waiting for its retry counts as queued).
func stateOf(g status.Group) string {
	if g.Agent == "retrying" {
		return "queued"
	}
	return g.Agent
}

func spendText(spent *float64, limit *float64) string {
	text := "unpriced" // no request of the span had a price: unknown, never $0
	if spent != nil {
		text = money(*spent)
	}
	if limit == nil {
		return text
	}
	return text + " of " + money(*limit)
}

// modelOf is the group's model as configured (its override's or
// agent.model), "default" for the SDK's own, and its provider unless that
// is the built-in one.
func modelOf(g status.Group) string {
	m := cmp.Or(g.Model, "default")
	if g.Provider != "" && g.Provider != "anthropic" {
		m += " (" + g.Provider + ")"
	}
	return m
}

func (s *Server) proofText() string {
	if s.o.Proof == nil {
		return "not run"
	}
	in, err := s.o.Proof.Peek()
	switch {
	case !in:
		return "running…"
	case err != nil:
		return "FAILED: " + err.Error()
	}
	return "passed: every boundary held"
}

func (s *Server) groupPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	folder := r.PathValue("folder")
	g, err := s.o.Groups.ByFolder(ctx, folder)
	if errors.Is(err, groups.ErrNotFound) {
		plain(w, http.StatusNotFound, "No group "+folder+" is registered.")
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d, err := s.groupData(ctx, g)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "group", g.Name, d)
}

type groupData struct {
	G                     groups.Group
	State, Channel, Model string
	In, Out, Runs, Tasks  any
	LastRun               *status.LastRun
	Violations            []violationRow
	Policy                []policyRow
	PolicyJSON            string
}

func (s *Server) groupData(ctx context.Context, g groups.Group) (groupData, error) {
	d := groupData{G: g, Channel: setup.Network(g.JID), Model: "default", State: "idle"}
	rep, err := s.o.Status(ctx)
	if err != nil {
		return d, err
	}
	if i := slices.IndexFunc(rep.Groups, func(x status.Group) bool { return x.Folder == g.Folder }); i >= 0 {
		d.State, d.LastRun, d.Model = stateOf(rep.Groups[i]), rep.Groups[i].LastRun, modelOf(rep.Groups[i])
	}
	if d.In, err = s.o.Messages.Recent(ctx, g.JID, 30); err != nil {
		return d, err
	}
	if d.Out, err = s.o.Outbox.RecentTo(ctx, g.JID, 30); err != nil {
		return d, err
	}
	if d.Runs, err = s.o.Usage.Runs(ctx, g.Folder, 20); err != nil {
		return d, err
	}
	var tasks []scheduler.Task
	if tasks, err = s.o.Tasks.List(ctx, g.Folder); err != nil {
		return d, err
	}
	d.Tasks = tasks
	vs, err := alerts.Newest(ctx, s.o.DB, g.Folder, 50)
	if err != nil {
		return d, err
	}
	d.Violations = s.violationRows(vs)
	// The same inputs `security show` and the router resolve with.
	cfg := s.o.Config()
	list, err := s.o.Groups.List(ctx)
	if err != nil {
		return d, err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	d.Policy = policyRows(eff, cfg.Layout().Group(g.Folder))
	b, _ := json.MarshalIndent(eff, "", "  ")
	d.PolicyJSON = string(b)
	return d, nil
}

func (s *Server) violationsPage(w http.ResponseWriter, r *http.Request) {
	vs, err := alerts.Newest(r.Context(), s.o.DB, "", 200)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "violations", "Violations", struct{ Violations []violationRow }{s.violationRows(vs)})
}

func (s *Server) violationRows(vs []alerts.Recorded) []violationRow {
	out := make([]violationRow, len(vs))
	for i, v := range vs {
		out[i] = s.violationRow(v)
	}
	return out
}
