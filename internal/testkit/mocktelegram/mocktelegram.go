// Package mocktelegram is a Bot API server on 127.0.0.1 for tests: real
// HTTP, the Bot API's JSON (and multipart uploads), one bot. A test pushes
// updates, which getUpdates serves until an offset past them confirms them
// — as Telegram does — and reads back every request the bot made.
//
// It is as strict as Telegram where a client can go wrong: after a 429 it
// answers every request 429 until retry_after has passed; it refuses text
// over 4096 and captions over 1024 characters (UTF-16, as shown after the
// HTML is parsed), HTML it cannot parse, and getFile of a file over 20 MB.
package mocktelegram

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bot is who the mock's getMe says the bot is (SetUsername changes the
// name).
const (
	BotID       = 7000001
	BotUsername = "nano_test_bot"
)

// Telegram's limits.
const (
	MaxText     = 4096     // a message's text
	MaxCaption  = 1024     // a file's caption
	MaxDownload = 20 << 20 // what getFile serves a bot
)

// Request is one call the bot made, its parameters as strings (nested
// objects as their JSON), and an uploaded file's name and bytes.
type Request struct {
	Method   string
	Params   map[string]string
	FileName string
	File     []byte
	Time     time.Time
	Answered int // the HTTP-level error code the mock answered, 0 for ok
}

// Chat is the chat id a request was about.
func (r Request) Chat() string { return r.Params["chat_id"] }

// Failure is an error answer the mock gives instead of the next success.
type Failure struct {
	Code        int
	Description string
	RetryAfter  int
}

// Server is the mock. Create it with Start.
type Server struct {
	URL   string
	Token string

	mu       sync.Mutex
	updates  []json.RawMessage // not yet confirmed, in update_id order
	ids      []int64
	nextID   int64
	requests []Request
	fail     map[string][]Failure
	files    map[string][]byte // file_id → bytes
	nextMsg  int
	changed  chan struct{} // closed and replaced on every change
	fetched  chan int64    // update ids as getUpdates hands them out
	conflict bool
	username string
	polls    []Request // every getUpdates
	flood    time.Time // every request before this is answered 429
}

// Start serves the mock until the test ends.
func Start(tb testing.TB, token string) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), Token: token, nextID: 100, nextMsg: 5000, username: BotUsername,
		fail: map[string][]Failure{}, files: map[string][]byte{}, changed: make(chan struct{}), fetched: make(chan int64, 100)}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	tb.Cleanup(func() { srv.Close() })
	return s
}

// WaitFetched waits until getUpdates has handed out update id.
func (s *Server) WaitFetched(tb testing.TB, id int64, d time.Duration) {
	tb.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-s.fetched:
			if got == id {
				return
			}
		case <-deadline:
			tb.Fatalf("mocktelegram: update %d was not fetched within %s (offsets asked: %v)", id, d, s.Offsets())
		}
	}
}

// SetUsername changes the bot's @username (getMe, the bot's messages).
func (s *Server) SetUsername(name string) {
	s.mu.Lock()
	s.username = name
	s.mu.Unlock()
}

// Polls is every getUpdates so far (Params: offset, timeout, …).
func (s *Server) Polls() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.polls...)
}

// Conflict makes every getUpdates answer 409, as when another program polls the bot.
func (s *Server) Conflict(on bool) {
	s.mu.Lock()
	s.conflict = on
	s.mu.Unlock()
}

// FailNext makes the next calls of method fail, one failure each.
func (s *Server) FailNext(method string, f ...Failure) {
	s.mu.Lock()
	s.fail[method] = append(s.fail[method], f...)
	s.mu.Unlock()
}

// AddFile stores bytes a later getFile and download serve; it returns the file_id.
func (s *Server) AddFile(data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("file-%d", len(s.files)+1)
	s.files[id] = data
	return id
}

// Push queues an update: obj is its content without update_id, e.g.
// {"message": {...}}. It returns the update_id.
func (s *Server) Push(obj map[string]any) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	obj["update_id"] = s.nextID
	raw, _ := json.Marshal(obj)
	s.updates = append(s.updates, raw)
	s.ids = append(s.ids, s.nextID)
	s.changedLocked()
	return s.nextID
}

// Offsets is every offset getUpdates was called with, in order.
func (s *Server) Offsets() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	offsets := make([]int64, len(s.polls))
	for i, p := range s.polls {
		offsets[i], _ = strconv.ParseInt(p.Params["offset"], 10, 64)
	}
	return offsets
}

// Requests is every call of method so far ("" every call).
func (s *Server) Requests(method string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// WaitFor waits until ok holds for the calls of method, and returns them.
func (s *Server) WaitFor(tb testing.TB, method string, d time.Duration, ok func([]Request) bool) []Request {
	tb.Helper()
	deadline := time.After(d)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if reqs := s.Requests(method); ok(reqs) {
			return reqs
		}
		select {
		case <-ch:
		case <-deadline:
			tb.Fatalf("mocktelegram: %s calls never matched within %s; calls so far: %+v", method, d, s.Requests(""))
			return nil
		}
	}
}

// failure is the error answer req gets instead of a success, if any: a
// getUpdates while another program polls (Conflict) gets 409; a request before a 429's retry_after has passed gets another 429, as
// Telegram answers one that did not wait; else the next of FailNext; else
// a refusal of text Telegram would not take.
func (s *Server) failure(req *Request) *Failure {
	var f *Failure
	if req.Method == "getUpdates" && s.conflict {
		f = &Failure{Code: 409, Description: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}
	} else if wait := time.Until(s.flood); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		f = &Failure{Code: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", secs), RetryAfter: secs}
	} else if q := s.fail[req.Method]; len(q) > 0 {
		f, s.fail[req.Method] = &q[0], q[1:]
		if f.Code == 429 && f.RetryAfter > 0 {
			s.flood = req.Time.Add(time.Duration(f.RetryAfter) * time.Second)
		}
	} else {
		f = refuseText(*req)
	}
	if f != nil {
		req.Answered = f.Code
	}
	return f
}

func (s *Server) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if file, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.Token+"/"); ok {
		s.download(w, file)
		return
	}
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+s.Token+"/")
	if !ok {
		answer(w, nil, &Failure{Code: 401, Description: "Unauthorized"})
		return
	}
	req := Request{Method: method, Params: map[string]string{}, Time: time.Now()}
	if err := parse(r, &req); err != nil {
		answer(w, nil, &Failure{Code: 400, Description: "Bad Request: " + err.Error()})
		return
	}
	s.mu.Lock()
	f := s.failure(&req)
	if method == "getUpdates" {
		s.polls = append(s.polls, req)
	} else {
		s.requests = append(s.requests, req)
	}
	s.changedLocked()
	username := s.username
	s.mu.Unlock()
	if f != nil {
		answer(w, nil, f)
		return
	}
	switch method {
	case "getMe":
		answer(w, map[string]any{"id": BotID, "is_bot": true, "first_name": "Nano", "username": username}, nil)
	case "getUpdates":
		s.getUpdates(w, r, req)
	case "getFile":
		s.mu.Lock()
		data, ok := s.files[req.Params["file_id"]]
		s.mu.Unlock()
		switch {
		case !ok:
			answer(w, nil, &Failure{Code: 400, Description: "Bad Request: invalid file_id"})
		case len(data) > MaxDownload:
			answer(w, nil, &Failure{Code: 400, Description: "Bad Request: file is too big"})
		default:
			answer(w, map[string]any{"file_id": req.Params["file_id"], "file_unique_id": "u" + req.Params["file_id"],
				"file_size": len(data), "file_path": "files/" + req.Params["file_id"]}, nil)
		}
	case "sendMessage", "sendPhoto", "sendDocument":
		chat, _ := strconv.ParseInt(req.Params["chat_id"], 10, 64)
		s.mu.Lock()
		s.nextMsg++
		id := s.nextMsg
		s.mu.Unlock()
		answer(w, map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": map[string]any{"id": chat, "type": "group"},
			"from": map[string]any{"id": BotID, "is_bot": true, "first_name": "Nano", "username": username}, "text": req.Params["text"]}, nil)
	case "setMessageReaction", "sendChatAction":
		answer(w, true, nil)
	default:
		answer(w, nil, &Failure{Code: 404, Description: "Not Found: method not found"})
	}
}

// getUpdates forgets the updates below offset (confirmed) and serves the
// rest, waiting up to the request's timeout (at most 2 s here) for one.
func (s *Server) getUpdates(w http.ResponseWriter, r *http.Request, req Request) {
	offset, _ := strconv.ParseInt(req.Params["offset"], 10, 64)
	timeout, _ := strconv.Atoi(req.Params["timeout"])
	deadline := time.After(time.Duration(min(timeout, 2)) * time.Second)
	s.mu.Lock()
	for offset > 0 && len(s.ids) > 0 && s.ids[0] < offset {
		s.ids, s.updates = s.ids[1:], s.updates[1:]
	}
	s.changedLocked()
	for len(s.ids) == 0 {
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			answer(w, []json.RawMessage{}, nil)
			return
		case <-r.Context().Done():
			return
		}
		s.mu.Lock()
	}
	out := append([]json.RawMessage(nil), s.updates...)
	ids := append([]int64(nil), s.ids...)
	s.mu.Unlock()
	answer(w, out, nil)
	for _, id := range ids {
		select {
		case s.fetched <- id:
		default:
		}
	}
}

func (s *Server) download(w http.ResponseWriter, path string) {
	s.mu.Lock()
	data, ok := s.files[strings.TrimPrefix(path, "files/")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, nil)
		return
	}
	w.Write(data)
}

// parse reads the parameters as the Bot API takes them: JSON, a URL-encoded
// form or multipart (with a file).
func parse(r *http.Request, req *Request) error {
	typ, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch typ {
	case "application/json":
		var m map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			var s string
			if json.Unmarshal(v, &s) == nil {
				req.Params[k] = s
			} else {
				req.Params[k] = string(v)
			}
		}
	case "multipart/form-data":
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) == 0 {
			return err // a method without parameters may send an empty body
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mr, err := r.MultipartReader()
		if err != nil {
			return err
		}
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			data, err := io.ReadAll(p)
			if err != nil {
				return err
			}
			if p.FileName() != "" {
				req.FileName, req.File = p.FileName(), data
				req.Params[p.FormName()] = "attach:" + p.FileName()
				continue
			}
			req.Params[p.FormName()] = string(data)
		}
	default:
		if err := r.ParseForm(); err != nil {
			return err
		}
		for k := range r.Form {
			req.Params[k] = r.Form.Get(k)
		}
	}
	return nil
}

// answer writes the Bot API's envelope.
func answer(w http.ResponseWriter, result any, f *Failure) {
	w.Header().Set("Content-Type", "application/json")
	if f == nil {
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
		return
	}
	body := map[string]any{"ok": false, "error_code": f.Code, "description": f.Description}
	if f.RetryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": f.RetryAfter}
	}
	w.WriteHeader(f.Code)
	json.NewEncoder(w).Encode(body)
}

// Updates the tests push.

// Group is a group chat object; Private a private chat with user.
func Group(id int64, title string) map[string]any {
	return map[string]any{"id": id, "type": "supergroup", "title": title}
}

func Private(user int64, name string) map[string]any {
	return map[string]any{"id": user, "type": "private", "first_name": name}
}

// User is a sender.
func User(id int64, name string) map[string]any {
	return map[string]any{"id": id, "is_bot": false, "first_name": name}
}

// Message is a "message" update's content with text; more adds fields
// (caption, photo, voice, reply_to_message, …).
func (s *Server) Message(chat, from map[string]any, text string, more map[string]any) map[string]any {
	s.mu.Lock()
	s.nextMsg++
	id := s.nextMsg
	s.mu.Unlock()
	m := map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": chat, "from": from}
	if text != "" {
		m["text"] = text
	}
	for k, v := range more {
		m[k] = v
	}
	return m
}

// Reaction is a "message_reaction" update's content.
func Reaction(chat, user map[string]any, messageID int, emoji string) map[string]any {
	return map[string]any{"chat": chat, "message_id": messageID, "user": user, "date": time.Now().Unix(),
		"old_reaction": []any{}, "new_reaction": []any{map[string]any{"type": "emoji", "emoji": emoji}}}
}
