package scheduler

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// RunNow makes an active task due now: the scheduler fires it as it fires
// any due task (its next run is then worked out from its schedule), so a
// task run from the console is the same run as a scheduled one.
func (s *Scheduler) RunNow(ctx context.Context, tx *store.Tx, id string) error {
	t, err := s.changeable(ctx, tx, id)
	if err != nil {
		return err
	}
	if t.Status != StatusActive {
		return fmt.Errorf("task %s is %s: resume it first", id, t.Status)
	}
	_, err = tx.ExecContext(ctx, `UPDATE scheduled_tasks SET next_run = ? WHERE id = ?`, s.now().UnixMilli(), id)
	return err
}
