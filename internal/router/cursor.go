package router

import "os"

// cursor is where a message run stands with its chat: the prompt batches
// handed to the agent, oldest first, and how many of them it answered. A
// task run has none. It is guarded by its agentRun's mu.
type cursor struct {
	batches   []batch // each prompt batch handed over (initial, then follow-ups)
	matched   int     // batches answered: batches[matched] is the oldest waiting
	delivered int64   // highest seq handed to the agent
}

// batch is messages handed to the agent in one prompt.
type batch struct {
	top  int64  // the highest seq among them
	file string // the follow-up file that carried them; "" for the prompt on stdin
}

// startAt is a cursor whose first batch, up to top, went as file ("" for
// the prompt on stdin).
func startAt(top int64, file string) cursor {
	return cursor{batches: []batch{{top, file}}, delivered: top}
}

// messages tells a message run's cursor from a task run's.
func (c *cursor) messages() bool { return c.batches != nil }

// hand records a follow-up batch, up to top, written as file.
func (c *cursor) hand(top int64, file string) {
	c.batches = append(c.batches, batch{top, file})
	c.delivered = top
}

// answer is the seq a result answers: the oldest batch waiting, once the
// agent has taken it. A follow-up file still in input/ was not read, so a
// result now (one an agent gives of itself, say when asked to finish) is
// not its answer: its text goes out, and the messages wait for the next
// run. 0: no cursor moves.
func (c *cursor) answer() int64 {
	if c.matched < len(c.batches) && !waiting(c.batches[c.matched].file) {
		c.matched++
		return c.batches[c.matched-1].top
	}
	return 0
}

// waiting reports whether the follow-up file is still there for the agent
// to take.
func waiting(file string) bool {
	if file == "" {
		return false
	}
	_, err := os.Lstat(file)
	return err == nil
}
