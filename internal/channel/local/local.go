// Package local is the local channel: HTTP on a Unix socket (mode 0600),
// for trying nanoclawd without WhatsApp and for end-to-end tests. Its chats
// have JIDs that start with "local:".
//
//	POST /messages {"chatJid","sender","senderName","text"} → 202 {"id","registered"}
//	               (optional "quotedId", or "quotedSender" and "quotedText": the message
//	               it replies to; "media": {"type","name","dataBase64","voice"}: a file,
//	               text its caption; "reactTo": ID and "emoji", no text: a reaction)
//	GET  /sent?after=SEQ&wait=SECONDS → 200 {"messages":[{"seq","chatJid","text","time"}]}
//	               (optional "chatJid=JID": only what was sent to that chat; a message
//	               with a file also has "file" (its name), "fileType" and "fileBytes";
//	               a reaction "reaction" (the emoji) and "reactTo")
//	GET  /files/SEQ → 200 the bytes of the file sent with message SEQ
//	GET  /health → 200 {"status":"ok",...}
//
// Client is the other end: 'nanoclawd chat' and the end-to-end tests.
package local

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Prefix starts every JID of this channel.
const Prefix = "local:"

const (
	maxBody = 1 << 20 // besides a file's base64
	maxWait = 60 * time.Second
	maxPage = 1000
)

// Channel is the local channel. What it sends is kept in SQLite, so /sent
// pages survive a restart and a retried send is not shown twice.
type Channel struct {
	socket   string
	db       *store.DB
	start    time.Time
	maxMedia func() int   // media.maxBytes now: a request may carry that much in base64
	ln       net.Listener // bound by Open, served by Run
	// registered tells whether a group has a chat (the POST's answer says).
	registered func(ctx context.Context, jid string) bool

	mu   sync.Mutex
	sent chan struct{} // closed and replaced whenever something is sent
}

// New returns the channel serving on socket and keeping its sent log in
// db; a posted file may be up to maxMedia() bytes, the current
// media.maxBytes (the router refuses a larger file itself, and says so in
// the prompt).
//
// registered tells whether a group has a chat, for the answer to a POST.
func New(socket string, db *store.DB, maxMedia func() int, registered func(ctx context.Context, jid string) bool) *Channel {
	return &Channel{socket: socket, db: db, sent: make(chan struct{}), start: time.Now(), maxMedia: maxMedia, registered: registered}
}

var (
	_ channel.Channel  = (*Channel)(nil)
	_ channel.Opener   = (*Channel)(nil)
	_ channel.Reporter = (*Channel)(nil)
)

// Name implements channel.Channel.
func (c *Channel) Name() string { return "local" }

// Owns implements channel.Channel.
func (c *Channel) Owns(jid string) bool { return strings.HasPrefix(jid, Prefix) }

// Connected implements channel.Channel: the channel can always send.
func (c *Channel) Connected() bool { return true }

// SetTyping implements channel.Channel; the local channel shows no typing.
func (c *Channel) SetTyping(context.Context, string, bool) error { return nil }

// Send implements channel.Channel. A repeat of the same m.ID is a no-op.
// A file is kept with the message, as the chat would show it.
func (c *Channel) Send(ctx context.Context, m channel.Outgoing) error {
	var name, mime sql.NullString
	var data []byte
	if m.File != nil {
		var err error
		if data, err = os.ReadFile(m.File.Path); err != nil {
			return fmt.Errorf("local channel: the file to send is gone: %w: %w", err, channel.ErrUndeliverable)
		}
		if data == nil {
			data = []byte{} // an empty file is still a file (NULL is none)
		}
		name, mime = sql.NullString{String: m.File.Name, Valid: true}, sql.NullString{String: m.File.MIME, Valid: true}
	}
	reactTo := sql.NullString{String: m.ReactTo, Valid: m.ReactTo != ""}
	_, err := c.db.ExecContext(ctx, `INSERT OR IGNORE INTO local_sent (out_id, chat_jid, text, time, file_name, file_mime, file_data, react_to)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, m.ID, m.ChatJID, m.Text, time.Now().UnixNano(), name, mime, data, reactTo)
	if err != nil {
		return fmt.Errorf("local channel: %w", err)
	}
	c.mu.Lock()
	close(c.sent)
	c.sent = make(chan struct{})
	c.mu.Unlock()
	return nil
}

// Run serves the socket until ctx ends.
func (c *Channel) Run(ctx context.Context, sink channel.Sink) error {
	if err := c.Open(); err != nil {
		return err
	}
	ln := c.ln
	srv := &http.Server{Handler: c.handler(sink), ReadHeaderTimeout: 10 * time.Second}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			srv.Close()
		}
	}()
	err := srv.Serve(ln)
	os.Remove(c.socket)
	if errors.Is(err, http.ErrServerClosed) {
		// Serve returns at once; a message being stored is waited for, as
		// the daemon closes SQLite after Run.
		<-stopped
		return nil
	}
	return err
}

// Status is the channel's line in nanoclawd status.
func (c *Channel) Status() string { return "serving " + c.socket }

// Open binds the socket, so that a client may connect from the moment it
// returns (the daemon calls it before it says it is running); Run serves
// it, and binds it first if Open was not called.
func (c *Channel) Open() error {
	if c.ln != nil {
		return nil
	}
	ln, err := listen(c.socket)
	c.ln = ln
	return err
}

// listen opens the socket with mode 0600, replacing a stale one left by a
// crash but never one that another process still serves.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("local channel: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("local channel: %s exists and is not a socket; move it away or set channels.local.socket", path)
		}
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil, fmt.Errorf("local channel: %s is served by another process (is another nanoclawd running?)", path)
		}
		os.Remove(path)
	}
	// Created 0600 from the start, so no one can connect in between.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("local channel: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Message is the body of POST /messages: an inbound message, as if Sender
// typed Text in ChatJID.
type Message struct {
	ChatJID    string `json:"chatJid"`
	Sender     string `json:"sender"`
	SenderName string `json:"senderName"`
	Text       string `json:"text"`
	// Optional: the message this one replies to, by its id, or by who
	// wrote it and what it said.
	QuotedID     string `json:"quotedId,omitempty"`
	QuotedSender string `json:"quotedSender,omitempty"`
	QuotedText   string `json:"quotedText,omitempty"`
	// Optional: a file sent with the message, Text its caption.
	Media *Media `json:"media,omitempty"`
	// A reaction (Text empty): Emoji to the chat's message ReactTo.
	ReactTo string `json:"reactTo,omitempty"`
	Emoji   string `json:"emoji,omitempty"`
}

// Media is a file as WhatsApp delivers one.
type Media struct {
	Type       string `json:"type"`           // the MIME type, e.g. "audio/ogg; codecs=opus"
	Name       string `json:"name,omitempty"` // the file name the sender gave
	DataBase64 string `json:"dataBase64"`
	Voice      bool   `json:"voice,omitempty"` // recorded in the chat as a voice note
}

// SentMessage is one entry of GET /sent.
type SentMessage struct {
	Seq     int64  `json:"seq"`
	ChatJID string `json:"chatJid"`
	Text    string `json:"text"` // with a file: its caption
	Time    string `json:"time"`
	// A file sent with the message (its bytes: GET /files/SEQ).
	File      string `json:"file,omitempty"`
	FileType  string `json:"fileType,omitempty"`
	FileBytes int64  `json:"fileBytes,omitempty"`
	// A reaction the daemon gave: the emoji, to the chat's message ReactTo.
	Reaction string `json:"reaction,omitempty"`
	ReactTo  string `json:"reactTo,omitempty"`
}

func (c *Channel) handler(sink channel.Sink) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /messages", func(w http.ResponseWriter, req *http.Request) {
		var in Message
		limit := int64(maxBody + base64.StdEncoding.EncodedLen(c.maxMedia()))
		dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, limit))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			code := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				code = http.StatusRequestEntityTooLarge
			}
			httpError(w, code, "body must be JSON {\"chatJid\",\"sender\",\"senderName\",\"text\"} of at most "+
				strconv.FormatInt(limit, 10)+" bytes (a file up to media.maxBytes, in base64): "+err.Error())
			return
		}
		if !c.Owns(in.ChatJID) {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("chatJid %q must start with %q", in.ChatJID, Prefix))
			return
		}
		m, problem := in.message()
		if problem != "" {
			httpError(w, http.StatusBadRequest, problem)
			return
		}
		m.ID, m.Time = newID(), time.Now()
		if err := sink.OnMessage(req.Context(), m); err != nil {
			httpError(w, http.StatusInternalServerError, "could not store the message: "+err.Error())
			return
		}
		writeJSON(w, http.StatusAccepted, Accepted{ID: m.ID, Registered: c.registered(req.Context(), m.ChatJID)})
	})
	mux.HandleFunc("GET /sent", func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		after, err1 := parseInt(q.Get("after"))
		wait, err2 := strconv.ParseFloat(orZero(q.Get("wait")), 64)
		if err1 != nil || err2 != nil || after < 0 || wait < 0 {
			httpError(w, http.StatusBadRequest, "after must be a whole number ≥ 0 and wait a number of seconds ≥ 0")
			return
		}
		deadline := time.Now().Add(min(time.Duration(wait*float64(time.Second)), maxWait))
		for {
			c.mu.Lock()
			changed := c.sent
			c.mu.Unlock()
			msgs, err := c.sentAfter(req.Context(), after, q.Get("chatJid"))
			if err != nil {
				httpError(w, http.StatusInternalServerError, err.Error())
				return
			}
			left := time.Until(deadline)
			if len(msgs) > 0 || left <= 0 {
				writeJSON(w, http.StatusOK, map[string]any{"messages": msgs})
				return
			}
			t := time.NewTimer(left)
			select {
			case <-changed:
			case <-t.C:
			case <-req.Context().Done():
				t.Stop()
				return
			}
			t.Stop()
		}
	})
	mux.HandleFunc("GET /files/{seq}", func(w http.ResponseWriter, req *http.Request) {
		var mime string
		var data []byte
		err := c.db.QueryRowContext(req.Context(), `SELECT file_mime, file_data FROM local_sent
			WHERE seq = ? AND file_data IS NOT NULL`, req.PathValue("seq")).Scan(&mime, &data)
		if errors.Is(err, sql.ErrNoRows) {
			httpError(w, http.StatusNotFound, "no message with that seq carried a file")
			return
		}
		if err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", mime)
		w.Write(data)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, req *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "channel": "local", "uptimeSeconds": int(time.Since(c.start).Seconds())})
	})
	return mux
}

func (c *Channel) sentAfter(ctx context.Context, after int64, chat string) ([]SentMessage, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT seq, chat_jid, text, time,
		COALESCE(file_name, ''), COALESCE(file_mime, ''), COALESCE(length(file_data), 0), COALESCE(react_to, '') FROM local_sent
		WHERE seq > ? AND (? = '' OR chat_jid = ?) ORDER BY seq LIMIT ?`, after, chat, chat, maxPage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []SentMessage{}
	for rows.Next() {
		var m SentMessage
		var ns int64
		if err := rows.Scan(&m.Seq, &m.ChatJID, &m.Text, &ns, &m.File, &m.FileType, &m.FileBytes, &m.ReactTo); err != nil {
			return nil, err
		}
		if m.ReactTo != "" {
			m.Reaction, m.Text = m.Text, ""
		}
		m.Time = time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000000Z07:00")
		out = append(out, m)
	}
	return out, rows.Err()
}

func parseInt(s string) (int64, error) { return strconv.ParseInt(orZero(s), 10, 64) }

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
