package e2e

// What the daemon sent, read through the local channel's GET /sent, and waits for it.

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
)

// Sent is one message the daemon sent, from GET /sent.
type Sent local.SentMessage

// At is when the daemon sent it.
func (s Sent) At(tb testing.TB) time.Time {
	tb.Helper()
	at, err := time.Parse(time.RFC3339Nano, s.Time)
	if err != nil {
		tb.Fatalf("sent time %q: %v", s.Time, err)
	}
	return at
}

// SentAfter is one page of GET /sent after seq, waiting up to wait for
// the first message.
func (in *Install) SentAfter(after int64, wait time.Duration) []Sent {
	in.TB.Helper()
	page, err := in.Local.Sent(context.Background(), after, wait, "")
	if err != nil {
		in.TB.Fatal(err)
	}
	out := make([]Sent, len(page))
	for i, m := range page {
		out[i] = Sent(m)
	}
	return out
}

// AllSent is everything on /sent so far.
func (in *Install) AllSent() []Sent {
	in.TB.Helper()
	var all []Sent
	var after int64
	for {
		page := in.SentAfter(after, 0)
		if len(page) == 0 {
			return all
		}
		all = append(all, page...)
		after = page[len(page)-1].Seq
	}
}

// WaitFor collects sent messages until one in chat satisfies ok, and
// returns everything sent up to it.
func (in *Install) WaitFor(chat string, ok func(string) bool) []Sent {
	in.TB.Helper()
	var all []Sent
	var after int64
	deadline := in.until(cmp.Or(in.wait, 60*time.Second))
	for time.Now().Before(deadline) {
		for _, m := range in.SentAfter(after, 5*time.Second) {
			all = append(all, m)
			after = m.Seq
			if m.ChatJID == chat && ok(m.Text) {
				return all
			}
		}
	}
	in.TB.Fatalf("no message in %s satisfied the check; sent: %+v", chat, all)
	return nil
}

// WaitNext returns the first message in chat that satisfies ok after the
// last one WaitNext returned. It reads /sent a page at a time and keeps
// what follows the match for the next call, so a benchmark's client does
// not compete with the daemon by reading the same messages again.
func (in *Install) WaitNext(chat string, ok func(string) bool) Sent {
	in.TB.Helper()
	var passed []Sent
	deadline := in.until(cmp.Or(in.wait, 60*time.Second))
	for {
		for len(in.pending) > 0 {
			m := in.pending[0]
			in.pending = in.pending[1:]
			if m.ChatJID == chat && ok(m.Text) {
				return m
			}
			passed = append(passed, m)
		}
		if !time.Now().Before(deadline) {
			in.TB.Fatalf("no message in %s satisfied the check; sent: %+v", chat, passed)
		}
		page := in.SentAfter(in.fetched, 5*time.Second)
		if len(page) > 0 {
			in.fetched = page[len(page)-1].Seq
		}
		in.pending = append(in.pending, page...)
	}
}

// InChat is the texts of the messages in chat.
func InChat(all []Sent, chat string) []string {
	var out []string
	for _, m := range all {
		if m.ChatJID == chat {
			out = append(out, m.Text)
		}
	}
	return out
}

// Equals is a check for WaitFor: the text is want.
func Equals(want string) func(string) bool { return func(s string) bool { return s == want } }
