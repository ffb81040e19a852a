package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client speaks the channel's HTTP API over its Unix socket: what
// 'nanoclawd chat' and the end-to-end tests use to play the people in a
// local chat.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client of the channel serving on socket. It holds
// no connection until the first request.
func NewClient(socket string) *Client {
	return &Client{socket: socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}}
}

// Post hands m to the daemon as an inbound message and returns its id.
// A message the daemon did not accept is an error that says why.
func (c *Client) Post(ctx context.Context, m Message) (string, error) {
	a, err := c.PostAccepted(ctx, m)
	return a.ID, err
}

// Accepted is the daemon's answer to a posted message.
type Accepted struct {
	ID string `json:"id"`
	// Registered is false for a chat no group has: nothing answers it.
	Registered bool `json:"registered"`
}

// PostAccepted is Post, with whether a group has the chat.
func (c *Client) PostAccepted(ctx context.Context, m Message) (Accepted, error) {
	var out Accepted
	body, err := json.Marshal(m)
	if err != nil {
		return out, err
	}
	err = c.do(ctx, http.MethodPost, "/messages", body, http.StatusAccepted, &out)
	return out, err
}

// Sent returns what the daemon sent after seq, oldest first, in chat (every
// chat if ""), one page at a time. When nothing is there yet it waits up
// to wait (at most a minute) for the first message.
func (c *Client) Sent(ctx context.Context, after int64, wait time.Duration, chat string) ([]SentMessage, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "wait": {strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)}}
	if chat != "" {
		q.Set("chatJid", chat)
	}
	var page struct {
		Messages []SentMessage `json:"messages"`
	}
	if err := c.do(ctx, http.MethodGet, "/sent?"+q.Encode(), nil, http.StatusOK, &page); err != nil {
		return nil, err
	}
	return page.Messages, nil
}

// File returns the bytes of the file sent with message seq.
func (c *Client) File(ctx context.Context, seq int64) ([]byte, error) {
	var data []byte
	err := c.do(ctx, http.MethodGet, "/files/"+strconv.FormatInt(seq, 10), nil, http.StatusOK, &data)
	return data, err
}

// Health returns nil when the channel answers on its socket.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/health", nil, http.StatusOK, nil)
}

// do sends one request and decodes a want-status answer into out; any
// other answer is an error carrying the channel's own message.
func (c *Client) do(ctx context.Context, method, path string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://local"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("local channel at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		var e struct {
			Error string `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("local channel at %s: %s %s: %s: %s", c.socket, method, strings.SplitN(path, "?", 2)[0], resp.Status, e.Error)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw, err = io.ReadAll(resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("local channel at %s: %s %s: %w", c.socket, method, path, err)
	}
	return nil
}
