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

// readFrames turns the agent's stdout into frames for the handler and log
// lines: it parses exact three-line frames; anything that is not one goes
// to the log.
func (p *process) readFrames(r *os.File) {
	var (
		state   int // 0 outside, 1 after start, 2 after payload
		payload []byte
		cutPay  bool
	)
	noise := func(line []byte, cut bool) { p.log.Line("stdout", line, cut) }
	readLines(r, p.spec.MaxLine, func(line []byte, cut bool) {
		p.touch()
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
				p.frame(payload, cutPay)
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

func (p *process) frame(payload []byte, cut bool) {
	if cut {
		// Most likely a result too long to carry: the chat is told rather
		// than left waiting for an answer that never comes.
		p.log.Printf("frame dropped: payload longer than %d bytes", p.spec.MaxLine)
		p.out.Results++
		note := fmt.Sprintf("(The answer was longer than %d MiB and could not be sent. Ask for a shorter one.)", p.spec.MaxLine>>20)
		p.h.OnResult(Result{Status: protocol.StatusSuccess, Result: &note})
		return
	}
	var fr protocol.Frame
	if err := json.Unmarshal(payload, &fr); err != nil {
		p.log.Printf("frame dropped: %v: %s", err, clip(payload, 200))
		return
	}
	switch fr.Type {
	case protocol.FrameResult:
		p.out.Results++
		if fr.NewSessionID != "" {
			p.out.NewSessionID = fr.NewSessionID
		}
		n := 0
		if fr.Result != nil {
			n = len(*fr.Result)
		}
		p.log.Printf("frame: result status=%s result=%dB newSessionId=%q error=%q", fr.Status, n, fr.NewSessionID, fr.Error)
		p.h.OnResult(Result{Status: fr.Status, Result: fr.Result, NewSessionID: fr.NewSessionID, Error: fr.Error, CostUSD: fr.CostUSD})
		p.out.Answered = fr.Status == protocol.StatusSuccess
		p.answer()
	case protocol.FrameViolation:
		// Whatever the frame claims, it is the agent's word: recorded as
		// "reported". Only what nanoclawd refused itself (gateway, IPC,
		// limits, links) is "blocked".
		p.log.Printf("frame: violation kind=%s tool=%s target=%q", fr.Kind, fr.Tool, fr.Target)
		p.h.OnViolation(security.Violation{
			Time: time.Now().UTC(), Group: p.spec.Input.GroupFolder,
			Kind: security.Kind(fr.Kind), Tool: fr.Tool, Target: fr.Target, Detail: fr.Detail, Action: protocol.ActionReported,
		})
	default:
		p.log.Printf("frame dropped: unknown type %q", fr.Type)
	}
}

func clip(b []byte, n int) []byte {
	if len(b) > n {
		return append(bytes.Clone(b[:n]), "…"...)
	}
	return b
}
