package media

import (
	"context"
	"errors"
	"sync"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/transcribe"
)

// errNoCopy: the note could not be kept where the transcriber reads it.
var errNoCopy = errors.New("the daemon could not keep a copy of it to transcribe")

// jailFor is how g's transcriber program runs: the main group's as the
// daemon (it is the owner's), every other group's as its runs' user,
// confined like a run.
func jailFor(cfg *config.Config, g groups.Group) *transcribe.Jail {
	if g.IsMain {
		return nil
	}
	return &transcribe.Jail{User: cfg.Agent.RunAs.User(), Limits: cfg.Agent.Limits.SandboxLimits()}
}

// A voice note is stored at once, saying it is not transcribed (what a
// crash leaves is then still true), and transcribed in the background:
// a long transcription holds up neither the channel, which acknowledges
// the message once it is stored, nor other groups. A run of the group
// waits for its chat's transcriptions (bounded by their timeout), so the
// agent sees the text.

// transcripts counts the transcriptions going on per chat. One chat's
// notes are transcribed one at a time (turns), so a burst of them starts
// one program, not dozens, while other chats' go on beside it.
type transcripts struct {
	mu      sync.Mutex
	going   map[string]int
	changed chan struct{}            // closed and replaced whenever a count drops
	turns   map[string]chan struct{} // per chat: holds a token while one is transcribed

	// The transcriptions' own life: Close ends them and waits, so that
	// none stores its transcript once the daemon has closed SQLite.
	life   context.Context
	end    context.CancelFunc
	closed bool
	runs   sync.WaitGroup
}

// begin counts one more transcription and returns its context; false: the
// daemon stops, and none starts.
func (t *transcripts) begin() (context.Context, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	if t.life == nil {
		t.life, t.end = context.WithCancel(context.Background())
	}
	t.runs.Add(1)
	return t.life, true
}

// Close ends the transcriptions going on and waits until they are gone. A
// note cut short keeps the marker it was stored with, which says the
// daemon stopped before its transcription finished.
func (in *Inbound) Close() {
	t := &in.transcripts
	t.mu.Lock()
	t.closed = true
	if t.end != nil {
		t.end()
	}
	t.mu.Unlock()
	t.runs.Wait()
}

// turn waits until no other transcription of chat is running and returns
// the func that ends this one's turn.
func (t *transcripts) turn(chat string) func() {
	t.mu.Lock()
	if t.turns == nil {
		t.turns = map[string]chan struct{}{}
	}
	ch := t.turns[chat]
	if ch == nil {
		ch = make(chan struct{}, 1)
		t.turns[chat] = ch
	}
	t.mu.Unlock()
	ch <- struct{}{}
	return func() { <-ch }
}

func (t *transcripts) add(chat string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.going == nil {
		t.going, t.changed = map[string]int{}, make(chan struct{})
	}
	t.going[chat] += n
	if n < 0 {
		if t.going[chat] <= 0 {
			delete(t.going, chat)
		}
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// wait returns once no transcription of chat is going, or ctx ends (its
// error) or stop is closed (context.Canceled); stop may be nil.
func (t *transcripts) wait(ctx context.Context, chat string, stop <-chan struct{}) error {
	for {
		t.mu.Lock()
		n, changed := t.going[chat], t.changed
		t.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return context.Canceled
		}
	}
}

// noteFor is what a voice note's marker says while (or if) no transcript
// is there.
func noteFor(err error) string {
	return "(not transcribed: " + err.Error() + ")"
}

// Transcribe transcribes the voice note r of m (counted since Receive)
// in the background and puts the transcript into its marker; then it
// calls then, as m may now start a run like any message.
func (in *Inbound) Transcribe(g groups.Group, m channel.Message, r Received, then func()) {
	s := r.saved
	// Its own context, which Close ends: not the channel's request's,
	// which may end long before.
	ctx, ok := in.transcripts.begin()
	if !ok {
		in.Drop(m.ChatJID, r) // its stored marker says the daemon stopped
		return
	}
	go func() {
		defer in.transcripts.runs.Done()
		defer in.transcripts.add(m.ChatJID, -1)
		defer in.transcripts.turn(m.ChatJID)()
		defer s.copy.Remove()
		cfg := in.Config()
		text, err := "", errNoCopy
		if s.copy.Path != "" {
			text, err = transcribe.File(ctx, cfg.Media.Transcribe, s.copy.Path, jailFor(cfg, g))
		}
		marker := s.text("transcript: " + text)
		if err != nil && ctx.Err() != nil {
			return // Close: the stored marker stays, and true
		}
		if err != nil {
			in.Log.Warn().Err(err).Str("group", g.Folder).Str("id", m.ID).Msg("transcribing a voice note failed; the agent is told so")
			marker = s.text(noteFor(err))
		}
		if err := in.Messages.SetMedia(ctx, m.ChatJID, m.ID, marker); err != nil {
			in.Log.Error().Err(err).Str("group", g.Folder).Str("id", m.ID).Msg("store a transcript")
		}
		then()
	}()
}
