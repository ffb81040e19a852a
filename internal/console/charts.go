package console

import (
	"context"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"
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
	return stackedBars("Spend per day per group, USD", days, ss, func(v float64) string { return fmt.Sprintf("$%.2f", v) }), nil
}

// stackedBars draws one stacked bar per label, with a legend.
func stackedBars(title string, labels []string, ss []series, unit func(float64) string) template.HTML {
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
	if top1 == 0 {
		top1 = 1 // an empty chart keeps its axes
	}
	var b strings.Builder
	legendH := 18.0 * float64((len(ss)+3)/4)
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		w, h+legendH, w, h+legendH, html.EscapeString(title))
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(title))
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, top+plotH, w-4, top+plotH)
	fmt.Fprintf(&b, `<line class="axis" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, left, top, left, top+plotH)
	fmt.Fprintf(&b, `<text x="4" y="%.0f">%s</text><text x="4" y="%.0f">%s</text>`, top+10, html.EscapeString(unit(top1)), top+plotH, html.EscapeString(unit(0)))
	slot := (w - left - 8) / float64(max(1, len(labels)))
	for i, l := range labels {
		x := left + 4 + float64(i)*slot
		y := top + plotH
		for k, s := range ss {
			v := s.Values[i]
			if v <= 0 {
				continue
			}
			bh := v / top1 * plotH
			y -= bh
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`,
				x, y, slot*0.8, bh, palette[k%len(palette)], html.EscapeString(s.Name), html.EscapeString(l), html.EscapeString(unit(v)))
		}
		if i == len(labels)-1 || len(labels) <= 8 || (i%7 == 0 && len(labels)-1-i >= 4) {
			anchor := "start"
			if i == len(labels)-1 && len(labels) > 8 {
				anchor, x = "end", x+slot*0.8 // the last day's label ends at its bar
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="%s">%s</text>`, x, h-bottom+16, anchor, html.EscapeString(shortLabel(l)))
		}
	}
	for k, s := range ss {
		x := 8 + float64(k%4)*(w/4)
		y := h + 18*float64(k/4)
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

// usagePage is the spend chart and the tokens by model of the last 30 days.
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
	var models []string
	for _, t := range rows {
		if !slices.Contains(models, t.Model) {
			models = append(models, t.Model)
		}
	}
	slices.Sort(models)
	kinds := []series{{Name: "input"}, {Name: "output"}, {Name: "cache write"}, {Name: "cache read"}}
	for i := range kinds {
		kinds[i].Values = make([]float64, len(models))
	}
	for _, t := range rows {
		m := slices.Index(models, t.Model)
		for i, v := range []int64{t.Input, t.Output, t.CacheWrite, t.CacheRead} {
			kinds[i].Values[m] += float64(v)
		}
	}
	byModel := stackedBars("Tokens by model", models, kinds, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	s.render(w, r, "usage", "Usage", struct {
		Chart, Models template.HTML
		Rows          any
	}{chart, byModel, rows})
}
