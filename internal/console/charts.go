package console

import (
	"cmp"
	"context"
	"fmt"
	"html"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// The charts are SVG the daemon draws: no script library, nothing loaded
// from elsewhere, and they show with scripts off. Colours are presentation
// attributes, which the style policy allows (they are not inline style).

var palette = []string{"#3b6fd1", "#d1683b", "#2e9d57", "#a64fb6", "#c98a14", "#2aa3a8", "#c8423b", "#6b7480"}

// series is one named line of values, one per x label.
type series struct {
	Name   string
	Values []float64
}

// spendChart is the last 30 days' spend per group, a bar stack per day.
func (s *Server) spendChart(ctx context.Context) (template.HTML, error) {
	cfg := s.o.Config()
	loc := cfg.Location()
	now := time.Now().In(loc)
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc).AddDate(0, 0, -(chartDays - 1))
	days := make([]string, chartDays)
	idx := map[string]int{}
	for i := range days {
		days[i] = start.AddDate(0, 0, i).Format(time.DateOnly)
		idx[days[i]] = i
	}
	costs, err := s.o.Usage.DailyCost(ctx, start, loc)
	if err != nil {
		return "", err
	}
	list, err := s.o.Groups.List(ctx)
	if err != nil {
		return "", err
	}
	var ss []series
	at := map[string]int{}
	for _, g := range list { // every group, spent or not
		at[g.Folder] = len(ss)
		ss = append(ss, series{Name: g.Folder, Values: make([]float64, chartDays)})
	}
	for _, c := range costs {
		i, ok := at[c.Group]
		if !ok { // spent, then unregistered
			i = len(ss)
			at[c.Group] = i
			ss = append(ss, series{Name: c.Group, Values: make([]float64, chartDays)})
		}
		if d, ok := idx[c.Day]; ok {
			ss[i].Values[d] += c.Cost
		}
	}
	return stackedBars("Spend per day per group, USD", days, ss, money, moneyAxis), nil
}

// moneyAxis labels a spend axis: cents while its top is under a dollar.
func moneyAxis(top float64) func(float64) string {
	if top < 1 {
		return cents
	}
	return func(v float64) string { return fmt.Sprintf("$%.2f", v) }
}

// countAxis labels a count axis: 1500 as 1.5k, 2000000 as 2M.
func countAxis(float64) func(float64) string {
	return func(v float64) string {
		switch {
		case v >= 1e6:
			return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
		case v >= 1e3:
			return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
}

// niceTop is the axis' top for a largest value v: 1, 2, 2.5 or 5 times a
// power of ten, at or above v, so its halves are round too.
func niceTop(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if top := m * p; top >= v*(1-1e-9) {
			// Keep the float noise of m*p out of the labels.
			top, _ = strconv.ParseFloat(strconv.FormatFloat(top, 'g', 6, 64), 64)
			return top
		}
	}
	return 10 * p
}

// stackedBars draws one stacked bar per label, with a legend; unit
// writes a bar's value, axis the labels of an axis up to a top.
func stackedBars(title string, labels []string, ss []series, unit func(float64) string, axis func(top float64) func(float64) string) template.HTML {
	const w, h, left, top, bottom = 760.0, 240.0, 56.0, 12.0, 34.0
	plotH := h - top - bottom
	top1 := 0.0
	for i := range labels {
		sum := 0.0
		for _, s := range ss {
			sum += s.Values[i]
		}
		top1 = max(top1, sum)
	}
	top1 = niceTop(top1) // an empty chart keeps its axes
	label := axis(top1)
	var b strings.Builder
	legendH := 8 + 18.0*float64((len(ss)+3)/4)
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		w, h+legendH, w, h+legendH, html.EscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, top+plotH, w-4, top+plotH)
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, top, left, top+plotH)
	for _, f := range []float64{1, 0.5, 0} {
		y := top + plotH*(1-f)
		if f > 0 {
			fmt.Fprintf(&b, `<line class="grid" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f"/>`, left, y, w-4, y)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" data-axis>%s</text>`, left-6, y+4, html.EscapeString(label(top1*f)))
	}
	slot := (w - left - 8) / float64(max(1, len(labels)))
	bw := min(slot*0.8, 48) // a lone bar stays a bar, not a wall
	for i, l := range labels {
		x := left + 4 + float64(i)*slot + (slot*0.8-bw)/2
		y := top + plotH
		for k, s := range ss {
			v := s.Values[i]
			if v <= 0 {
				continue
			}
			bh := v / top1 * plotH
			y -= bh
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
				x, y, bw, bh, palette[k%len(palette)], html.EscapeString(s.Name), html.EscapeString(l), html.EscapeString(unit(v)))
		}
		if i == len(labels)-1 || len(labels) <= 8 || (i%7 == 0 && len(labels)-1-i >= 4) {
			anchor := "start"
			if i == len(labels)-1 && len(labels) > 8 {
				anchor, x = "end", x+bw // the last day's label ends at its bar
			}
			// "provider · model" on two lines, so neighbours do not overlap.
			first, second, _ := strings.Cut(shortLabel(l), " · ")
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="%s">%s`, x, h-bottom+14, anchor, html.EscapeString(first))
			if second != "" {
				fmt.Fprintf(&b, `<tspan x="%.1f" dy="13">%s</tspan>`, x, html.EscapeString(second))
			}
			b.WriteString(`</text>`)
		}
	}
	for k, s := range ss {
		x := 8 + float64(k%4)*(w/4)
		y := h + 8 + 18*float64(k/4)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f" data-legend="%s">%s</text>`,
			x, y-2, palette[k%len(palette)], x+14, y+7, html.EscapeString(s.Name), html.EscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// shortLabel turns 2026-11-27 into 11-27.
func shortLabel(l string) string {
	if len(l) == len(time.DateOnly) {
		return l[5:]
	}
	return l
}

// usagePage is the spend chart and the tokens by provider and model of
// the last 30 days, and the tables behind them.
func (s *Server) usagePage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	chart, err := s.spendChart(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, err := s.o.Usage.TotalsByModel(ctx, time.Now().AddDate(0, 0, -chartDays), time.Now().Add(time.Minute), "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Sum over groups per provider and model: the chart's bars and the
	// first table; the second keeps each group's rows.
	var byModel []usage.ModelTotal
	for _, t := range rows {
		i := slices.IndexFunc(byModel, func(m usage.ModelTotal) bool { return m.Provider == t.Provider && m.Model == t.Model })
		if i < 0 {
			byModel = append(byModel, usage.ModelTotal{Provider: t.Provider, Model: t.Model, Priced: true})
			i = len(byModel) - 1
		}
		m := &byModel[i]
		m.Requests += t.Requests
		m.Input, m.Output, m.CacheWrite, m.CacheRead = m.Input+t.Input, m.Output+t.Output, m.CacheWrite+t.CacheWrite, m.CacheRead+t.CacheRead
		m.CostUSD += t.CostUSD
		m.Priced = m.Priced && t.Priced
	}
	order := func(a, b usage.ModelTotal) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Group, b.Group))
	}
	slices.SortFunc(byModel, order)
	slices.SortFunc(rows, order)
	labels := make([]string, len(byModel))
	kinds := []series{{Name: "input"}, {Name: "output"}, {Name: "cache write"}, {Name: "cache read"}}
	for i := range kinds {
		kinds[i].Values = make([]float64, len(byModel))
	}
	for m, t := range byModel {
		labels[m] = t.Provider + " · " + t.Model
		for i, v := range []int64{t.Input, t.Output, t.CacheWrite, t.CacheRead} {
			kinds[i].Values[m] = float64(v)
		}
	}
	tokens := stackedBars("Tokens by provider and model", labels, kinds, func(v float64) string { return fmt.Sprintf("%.0f", v) }, countAxis)
	s.render(w, r, "usage", "Usage", struct {
		Chart, Models template.HTML
		ByModel, Rows []usage.ModelTotal
	}{chart, tokens, byModel, rows})
}
