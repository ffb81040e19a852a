package console

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// How the console writes times, money and audit records: one way each,
// on every page and in the live column alike.

// timeLayout is the one time format: 24 h, in the configured zone.
const timeLayout = "Jan 2 15:04:05"

// clock writes t in the install's time zone (the config's, not the
// process's).
func (s *Server) clock(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(s.o.Config().Location()).Format(timeLayout)
}

// money writes US dollars as an owner reads them: dollars and cents, or
// cents when it is less than one (an agent's turn often costs a fraction
// of a cent, which "$0.00" would hide).
func money(usd float64) string {
	switch c := usd * 100; {
	case usd == 0:
		return "$0.00"
	case math.Abs(c) < 0.01:
		return "<0.01¢"
	case math.Abs(c) < 1:
		return strconv.FormatFloat(c, 'f', 2, 64) + "¢"
	}
	return fmt.Sprintf("$%.2f", usd)
}

// cents writes an axis value of a chart whose top is under a dollar.
func cents(usd float64) string {
	return strconv.FormatFloat(usd*100, 'f', -1, 64) + "¢"
}

// violationRow is one record of the audit trail as the tables show it.
type violationRow struct {
	ID     int64  `json:"id"`
	Time   string `json:"time"`
	Group  string `json:"group"`
	What   string `json:"what"`
	Action string `json:"action"`
	Detail string `json:"detail,omitempty"` // when it says more than What
}

func (s *Server) violationRow(v alerts.Recorded) violationRow {
	r := violationRow{ID: v.ID, Time: s.clock(v.Time), Group: v.Group, What: sentence(v.Violation), Action: v.Action}
	if v.Detail != r.What {
		r.Detail = v.Detail
	}
	return r
}

// byOwner tells an owner's own action (a pause, an /allow) from a refusal.
func byOwner(v security.Violation) bool { return strings.HasSuffix(v.Action, "-by-owner") }

// sentence says what a record of the audit trail is about, in words:
// "work: Bash was kept from reaching evil.example.com". An owner's action
// carries its own sentence in its detail.
func sentence(v security.Violation) string {
	if byOwner(v) {
		return v.Detail
	}
	tool, target := v.Tool, v.Target
	if tool == "" || tool == string(v.Kind) {
		tool = "a command" // the egress gateway names the kind as its tool
	}
	var what string
	switch v.Kind {
	case security.KindNetwork:
		what = tool + " was kept from reaching " + target
	case security.KindFilesystem:
		what = tool + " was kept from " + target
	case security.KindTool:
		what = tool + " is not one of its tools"
		if target != "" && target != v.Tool {
			what += " (" + target + ")"
		}
	case security.KindPermission:
		what = tool + " was not permitted"
		if target != "" {
			what += " on " + target
		}
	case security.KindIPC:
		what = "it tried to act for another group (" + target + ")"
	case security.KindLimit:
		what = "its run went over the " + target + " limit and was stopped"
	default:
		what = tool + " was refused " + string(v.Kind) + " access to " + target
	}
	line := v.Group + ": " + what
	if v.Action == "reported" {
		line += ", the agent reports (nanoclawd did not see it)"
	}
	return line
}
