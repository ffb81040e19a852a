package runner

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// frameReader turns the agent's stdout into frames and log lines.
type frameReader struct {
	spec     *Spec
	h        Handler
	log      *runLog
	out      *Outcome
	touch    func()
	answered func() // a result frame was read
}

// read parses exact three-line frames; anything that is not one goes to the log.
func (f *frameReader) read(r *os.File) {
	var (
		state   int // 0 outside, 1 after start, 2 after payload
		payload []byte
		cutPay  bool
	)
	noise := func(line []byte, cut bool) { f.log.Line("stdout", line, cut) }
	readLines(r, f.spec.MaxLine, func(line []byte, cut bool) {
		f.touch()
		isStart := !cut && string(line) == protocol.FrameStart
		switch state {
		case 0:
			if isStart {
				state = 1
				return
			}
			noise(line, cut)
		case 1:
			if isStart { // a stray start marker; the new one counts
				noise(line, false)
				return
			}
			payload = append(payload[:0], line...)
			cutPay = cut
			state = 2
		case 2:
			state = 0
			if !cut && string(line) == protocol.FrameEnd {
				f.frame(payload, cutPay)
				return
			}
			noise([]byte(protocol.FrameStart), false)
			noise(payload, cutPay)
			if isStart {
				state = 1
				return
			}
			noise(line, cut)
		}
	})
	switch state {
	case 1:
		noise([]byte(protocol.FrameStart), false)
	case 2:
		noise([]byte(protocol.FrameStart), false)
		noise(payload, cutPay)
	}
}

func (f *frameReader) frame(payload []byte, cut bool) {
	if cut {
		// Most likely a result too long to carry: the chat is told rather
		// than left waiting for an answer that never comes.
		f.log.Printf("frame dropped: payload longer than %d bytes", f.spec.MaxLine)
		f.out.Results++
		note := fmt.Sprintf("(The answer was longer than %d MiB and could not be sent. Ask for a shorter one.)", f.spec.MaxLine>>20)
		f.h.OnResult(Result{Status: protocol.StatusSuccess, Result: &note})
		return
	}
	var fr protocol.Frame
	if err := json.Unmarshal(payload, &fr); err != nil {
		f.log.Printf("frame dropped: %v: %s", err, clip(payload, 200))
		return
	}
	switch fr.Type {
	case protocol.FrameResult:
		f.out.Results++
		if fr.NewSessionID != "" {
			f.out.NewSessionID = fr.NewSessionID
		}
		n := 0
		if fr.Result != nil {
			n = len(*fr.Result)
		}
		f.log.Printf("frame: result status=%s result=%dB newSessionId=%q error=%q", fr.Status, n, fr.NewSessionID, fr.Error)
		f.h.OnResult(Result{Status: fr.Status, Result: fr.Result, NewSessionID: fr.NewSessionID, Error: fr.Error})
		f.out.Answered = fr.Status == protocol.StatusSuccess
		f.answered()
	case protocol.FrameViolation:
		// Whatever the frame claims, it is the agent's word: recorded as
		// "reported". Only what nanoclawd refused itself (gateway, IPC,
		// limits, links) is "blocked".
		f.log.Printf("frame: violation kind=%s tool=%s target=%q", fr.Kind, fr.Tool, fr.Target)
		f.h.OnViolation(security.Violation{
			Time: time.Now().UTC(), Group: f.spec.Input.GroupFolder,
			Kind: security.Kind(fr.Kind), Tool: fr.Tool, Target: fr.Target, Detail: fr.Detail, Action: protocol.ActionReported,
		})
	default:
		f.log.Printf("frame dropped: unknown type %q", fr.Type)
	}
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return append(bytes.Clone(b[:n]), "…"...)
	}
	return b
}
