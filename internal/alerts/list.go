package alerts

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Filter selects violations for List.
type Filter struct {
	Group string        // a group folder; "" = every group
	Since time.Duration // only the last Since; 0 = all time
}

// List returns the recorded violations matching f, oldest first. The
// slice is empty, not nil, when there are none (so JSON prints []).
func List(ctx context.Context, db *store.DB, f Filter) ([]security.Violation, error) {
	q := `SELECT time, grp, kind, tool, target, detail, action, rule FROM violations WHERE 1 = 1`
	var args []any
	if f.Group != "" {
		q += ` AND grp = ?`
		args = append(args, f.Group)
	}
	if f.Since > 0 {
		q += ` AND time >= ?`
		args = append(args, time.Now().Add(-f.Since).UnixNano())
	}
	q += ` ORDER BY time, id`
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("alerts: list violations: %w", err)
	}
	defer rows.Close()
	out := []security.Violation{}
	for rows.Next() {
		var (
			v  security.Violation
			ns int64
		)
		if err := rows.Scan(&ns, &v.Group, &v.Kind, &v.Tool, &v.Target, &v.Detail, &v.Action, &v.Rule); err != nil {
			return nil, fmt.Errorf("alerts: list violations: %w", err)
		}
		v.Time = time.Unix(0, ns).UTC()
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("alerts: list violations: %w", err)
	}
	return out, nil
}

// tableDetail caps the detail column so a row stays on one screen line.
const tableDetail = 60

// FormatTable writes vs as an aligned text table (local times), or a line
// saying there are none.
func FormatTable(w io.Writer, vs []security.Violation) error {
	if len(vs) == 0 {
		_, err := fmt.Fprintln(w, "No violations recorded.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tGROUP\tKIND\tTOOL\tTARGET\tACTION\tREFUSED BY\tDETAIL")
	for _, v := range vs {
		rule := v.Rule
		if rule == "" {
			rule = defaultRule(v)
		}
		// Stored text is already cleaned; clean again so a table never
		// carries a tab or newline that would break its columns.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Time.Local().Format("2006-01-02 15:04:05"),
			clean(v.Group, maxGroup), clean(string(v.Kind), maxKind), clean(v.Tool, maxTool),
			clean(v.Target, maxAlertTarget), clean(v.Action, maxKind), clean(rule, maxStoredField), clean(v.Detail, tableDetail))
	}
	return tw.Flush()
}

// CountViolations counts the violations recorded since t, by group and kind.
func CountViolations(ctx context.Context, db *store.DB, since time.Time) (map[string]map[string]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT grp, kind, COUNT(*) FROM violations WHERE time >= ? GROUP BY grp, kind`, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("alerts: count violations: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var (
			grp, kind string
			n         int
		)
		if err := rows.Scan(&grp, &kind, &n); err != nil {
			return nil, fmt.Errorf("alerts: count violations: %w", err)
		}
		if out[grp] == nil {
			out[grp] = map[string]int{}
		}
		out[grp][kind] = n
	}
	return out, rows.Err()
}
