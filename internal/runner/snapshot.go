package runner

import (
	"slices"
	"strings"
	"time"
)

// GroupState is what the queue knows about one group at a moment, for
// `nanoclawd status`.
type GroupState struct {
	Folder       string
	Running      bool
	RunningSince time.Time // when the current run started
	RunningTask  string    // the task id of the current run; "" for messages
	Queued       bool      // waiting in line for a free slot
	Messages     bool      // a message run is due
	Tasks        int       // due tasks waiting
	Retries      int       // failed message runs in a row
	RetryWaiting bool      // a failed message run waits for its backoff
}

// Snapshot returns the state of every group the queue has seen, by folder.
func (q *Queue) Snapshot() []GroupState {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]GroupState, 0, len(q.groups))
	for _, g := range q.groups {
		s := GroupState{Folder: g.folder, Queued: g.queued, Messages: g.messages, Tasks: len(g.tasks),
			Retries: g.retries, RetryWaiting: g.backoff != nil}
		if a := g.active; a != nil {
			s.Running, s.RunningSince, s.RunningTask = true, a.started, a.job.TaskID
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b GroupState) int { return strings.Compare(a.Folder, b.Folder) })
	return out
}
