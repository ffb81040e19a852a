// Package media keeps the files people send with their messages: each is
// saved in its group's media/ and named in the prompt by a marker
// (save.go); a voice note is transcribed in the background, one at a
// time per chat, and its transcript joins its marker (transcripts.go).
package media

import (
	"context"
	"errors"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/transcribe"
)

// Markers stores a message's marker once its transcript is there.
type Markers interface {
	SetMedia(ctx context.Context, chat, id, media string) error
}

// Inbound is what the daemon does with received files.
type Inbound struct {
	Config   func() *config.Config // the current config (it may be reloaded)
	Reporter security.Reporter     // a link the group planted where media/ belongs
	Messages Markers
	Log      zerolog.Logger

	transcripts transcripts
}

// Received is a message's file as the daemon keeps it.
type Received struct {
	saved
	// Marker is what the message is stored with: the file's marker, and
	// for a voice note why it holds no transcript (yet).
	Marker string
	later  bool // a voice note to transcribe once its message is stored
}

// Later reports whether the file is a voice note to transcribe: the
// caller hands it to Transcribe once its message is stored, or to Drop.
func (r Received) Later() bool { return r.later }

// Receive saves m's file into g's media/ and returns its marker. A voice
// note to transcribe is counted from now on, so that no run of its chat
// reads it untranscribed (Wait).
func (in *Inbound) Receive(ctx context.Context, g groups.Group, m channel.Message) Received {
	file := in.save(ctx, g, m)
	r := Received{saved: file, Marker: file.text("")}
	if file.rel != "" && (file.kind == channel.MediaVoice || file.kind == channel.MediaAudio) {
		if r.later = transcribe.Configured(in.Config().Media.Transcribe); r.later {
			in.transcripts.add(m.ChatJID, 1)
			r.Marker = file.text(noteFor(errors.New("the daemon stopped before the transcription finished")))
		} else {
			r.Marker = file.text(noteFor(transcribe.ErrNone))
		}
	}
	return r
}

// Drop forgets a voice note whose message was not stored.
func (in *Inbound) Drop(chat string, r Received) {
	if r.later {
		r.copy.Remove()
		in.transcripts.add(chat, -1)
	}
}

// Wait returns once no transcription of chat is going, or ctx ends (its
// error) or stop is closed (context.Canceled); stop may be nil.
func (in *Inbound) Wait(ctx context.Context, chat string, stop <-chan struct{}) error {
	return in.transcripts.wait(ctx, chat, stop)
}
