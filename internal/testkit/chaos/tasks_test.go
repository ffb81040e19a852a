package chaos

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// What "exactly once" means for a scheduled task. The scheduler claims a
// slot (stores the task's next run and a "running" run-log row) before it
// hands the run over, so a slot never runs twice; a run the daemon's death
// interrupts is not run again, and its output may be missing — the next
// slot comes on schedule. So the checker holds it to: each schedule_task
// file an agent wrote is one task; no slot runs twice; every run the
// daemon recorded with an output had that output sent exactly once; no
// output is sent that no run accounts for; and once the faults stop, no
// task stays overdue and every task has fired.

// overdue is how late a due task may still be unclaimed once the faults
// have stopped (the scheduler claims at once; this is slack for a loaded
// machine, not a wait).
const overdue = 30 * time.Second

type task struct {
	id, typ, value, status string
	next                   sql.NullInt64
	created                int64
	runs                   []taskRun
}

type taskRun struct {
	status, result string
	started        int64
}

// tasks reads the scheduled tasks of the load (by the token in their
// prompt) and their run logs.
func tasks(t *testing.T, in *e2e.Install) map[string][]*task {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(in.Dir, "data", "nanoclaw.db")+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]*task{}
	byID := map[string]*task{}
	rows, err := db.Query(`SELECT id, prompt, schedule_type, schedule_value, status, next_run, created_at FROM scheduled_tasks`)
	if err != nil {
		t.Fatalf("read scheduled tasks: %v", err)
	}
	for rows.Next() {
		var tk task
		var prompt string
		if err := rows.Scan(&tk.id, &prompt, &tk.typ, &tk.value, &tk.status, &tk.next, &tk.created); err != nil {
			t.Fatal(err)
		}
		tok := jobRE.FindString(prompt)
		out[tok] = append(out[tok], &tk)
		byID[tk.id] = &tk
	}
	rows.Close()
	rows, err = db.Query(`SELECT task_id, status, COALESCE(result, ''), started_at FROM task_run_logs ORDER BY id`)
	if err != nil {
		t.Fatalf("read task run logs: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var r taskRun
		if err := rows.Scan(&id, &r.status, &r.result, &r.started); err != nil {
			t.Fatal(err)
		}
		if tk := byID[id]; tk != nil {
			tk.runs = append(tk.runs, r)
		}
	}
	return out
}

// waiting says what of the tasks written is not done yet: a task file not
// yet carried out, a task due but not fired, a task that never ran.
func waiting(t *testing.T, in *e2e.Install, written map[string]int) string {
	all := tasks(t, in)
	for tok, w := range written {
		if len(all[tok]) < w {
			return "task " + tok + " not created yet"
		}
		for _, tk := range all[tok] {
			if len(tk.runs) == 0 {
				return "task " + tok + " not fired yet"
			}
		}
	}
	return ""
}

func (h *history) checkTasks(t *testing.T, in *e2e.Install, sent []e2e.Sent, written map[string]int) {
	all := tasks(t, in)
	outputs := map[string]int{} // each output's text: "ran TOKEN #RUN-ID"
	for _, m := range sent {
		if strings.HasPrefix(m.Text, "ran ") {
			outputs[m.Text]++
		}
	}
	for text, c := range outputs {
		if c > 1 {
			h.doubled++
			t.Errorf("task output %q sent %d times", text, c)
		}
	}
	now := time.Now()
	runs, interruptedRuns := 0, 0
	for tok, w := range written {
		if c := len(all[tok]); c != w {
			h.count(c, w)
			t.Errorf("schedule_task file %s written %d times by agents made %d tasks", tok, w, c)
		}
		accounted, interrupted := 0, 0
		for _, tk := range all[tok] {
			what := fmt.Sprintf("task %s (%s %s, %s)", tok, tk.typ, tk.value, tk.id)
			if tk.status == "active" && tk.next.Valid && time.UnixMilli(tk.next.Int64).Before(now.Add(-overdue)) {
				h.lost++
				t.Errorf("%s overdue since %v: it never fired", what, time.UnixMilli(tk.next.Int64).Format(time.TimeOnly))
			}
			if len(tk.runs) == 0 {
				h.lost++
				t.Errorf("%s never ran", what)
			}
			if tk.typ == "once" && len(tk.runs) > 1 {
				h.doubled++
				t.Errorf("%s ran %d times", what, len(tk.runs))
			}
			if tk.typ == "interval" {
				every, _ := strconv.ParseInt(tk.value, 10, 64)
				for i := 1; i < len(tk.runs); i++ {
					if gap := tk.runs[i].started - tk.runs[i-1].started; gap < every/2 {
						h.doubled++
						t.Errorf("%s ran twice %d ms apart: one slot run twice", what, gap)
					}
				}
			}
			for _, r := range tk.runs {
				runs++
				if r.result == "" {
					interrupted++ // killed before its output, or the daemon died before it recorded the end
					continue
				}
				accounted++
				if c := outputs[r.result]; c != 1 {
					h.count(c, 1)
					t.Errorf("%s: the output %q of a recorded run was sent %d times", what, r.result, c)
				}
			}
		}
		interruptedRuns += interrupted
		total := 0
		for text, c := range outputs {
			if strings.HasPrefix(text, "ran "+tok+" #") {
				total += c
			}
		}
		if total-accounted > interrupted {
			h.doubled++
			t.Errorf("task %s: %d outputs sent, but its runs account for at most %d", tok, total, accounted+interrupted)
		}
	}
	h.checked["tasks scheduled through IPC"] = sum(written)
	h.checked["task runs"] = runs
	h.checked["task runs without a recorded output (interrupted)"] = interruptedRuns
	h.checked["task outputs sent"] = sum(outputs)
}
