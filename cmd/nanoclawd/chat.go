package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
)

func init() {
	register("chat", "chat --chat JID [--as NAME]   talk to the daemon over the local channel", chat)
}

func chat(ctx context.Context, g *globals, args []string) error {
	const usage = "chat --chat JID [--as NAME]"
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	jid := fs.String("chat", "", "")
	as := fs.String("as", "", "")
	if _, err := parseFlags(fs, args, 0, 0, usage); err != nil {
		return err
	}
	if !strings.HasPrefix(*jid, local.Prefix) {
		return fmt.Errorf("--chat must be a local chat JID such as local:family; usage: nanoclawd %s", usage)
	}
	if *as == "" {
		*as = os.Getenv("USER")
		if *as == "" {
			*as = "me"
		}
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", cfg.Channels.Local.Socket)
		},
	}}
	if _, err := client.Get("http://local/health"); err != nil {
		return fmt.Errorf("cannot reach the daemon at %s: set channels.local.enabled to true and start 'nanoclawd run' (%v)", cfg.Channels.Local.Socket, err)
	}
	// Show only what is sent from now on.
	after, err := latestSeq(ctx, client, *jid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			msgs, err := fetchSent(ctx, client, after, *jid, 30)
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintln(g.stderr, "nanoclawd chat:", err)
					time.Sleep(time.Second)
				}
				continue
			}
			for _, m := range msgs {
				after = max(after, m.Seq)
				fmt.Fprintf(g.stdout, "%s: %s\n", cfg.AssistantName, m.Text)
			}
		}
	}()
	fmt.Fprintf(g.stderr, "chatting in %s as %s; type a message and press Enter (Ctrl-D to leave)\n", *jid, *as)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		text := strings.TrimSpace(in.Text())
		if text == "" {
			continue
		}
		body, _ := json.Marshal(map[string]string{"chatJid": *jid, "sender": *as, "senderName": *as, "text": text})
		resp, err := client.Post("http://local/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			fmt.Fprintf(g.stderr, "nanoclawd chat: not accepted: %s\n", strings.TrimSpace(string(msg)))
		}
	}
	// Give a reply to the last line a moment to arrive before leaving.
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	return in.Err()
}

func fetchSent(ctx context.Context, client *http.Client, after int64, jid string, wait int) ([]local.SentMessage, error) {
	u := fmt.Sprintf("http://local/sent?after=%d&wait=%d&chatJid=%s", after, wait, url.QueryEscape(jid))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var page struct {
		Messages []local.SentMessage `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, fmt.Errorf("read replies: %w", err)
	}
	return page.Messages, nil
}

func latestSeq(ctx context.Context, client *http.Client, jid string) (int64, error) {
	var after int64
	for {
		msgs, err := fetchSent(ctx, client, after, jid, 0)
		if err != nil || len(msgs) == 0 {
			return after, err
		}
		after = msgs[len(msgs)-1].Seq
	}
}
