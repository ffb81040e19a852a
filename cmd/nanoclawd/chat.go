package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
)

// chatCommand is 'nanoclawd chat': a person in a chat of the local channel.
type chatCommand struct{}

func (chatCommand) Usage() string { return "chat --chat JID [--as NAME]" }

func (c chatCommand) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	jid := fs.String("chat", "", "the chat to talk in, by its `JID` local:NAME, registered with 'nanoclawd groups add' (required)")
	as := fs.String("as", "", "the sender `NAME` the agent sees (default $USER)")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	if !strings.HasPrefix(*jid, local.Prefix) {
		return g.usageError(c, "--chat must be a local chat JID such as local:family")
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
	client := local.NewClient(cfg.Channels.Local.Socket)
	if err := client.Health(ctx); err != nil {
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
		down := false // said "not reachable": said once, and "back" once when it is
		for ctx.Err() == nil {
			msgs, err := client.Sent(ctx, after, 30*time.Second, *jid)
			if err != nil {
				if ctx.Err() == nil {
					if !down {
						fmt.Fprintln(g.stderr, "nanoclawd chat: daemon not reachable, retrying…")
						down = true
					}
					time.Sleep(time.Second) // the daemon may be restarting: ask again soon, not in a tight loop
				}
				continue
			}
			if down {
				fmt.Fprintln(g.stderr, "nanoclawd chat: back")
				down = false
			}
			for _, m := range msgs {
				after = max(after, m.Seq)
				if m.ReactTo != "" {
					fmt.Fprintf(g.stdout, "%s reacted %s to %s\n", cfg.AssistantName, m.Reaction, m.ReactTo)
					continue
				}
				fmt.Fprintf(g.stdout, "%s: %s\n", cfg.AssistantName, m.Text)
				if m.File != "" {
					fmt.Fprintf(g.stdout, "  [file %s, %s, %d bytes: GET /files/%d on the socket]\n", m.File, m.FileType, m.FileBytes, m.Seq)
				}
			}
		}
	}()
	fmt.Fprintf(g.stderr, "chatting in %s as %s; type a message and press Enter (Ctrl-D to leave)\n"+
		"  /file PATH [CAPTION], /voice PATH: send a file or a voice note; /react ID EMOJI: react to message ID\n", *jid, *as)
	in := bufio.NewScanner(os.Stdin)
	warned := false // that the chat is not registered
	for in.Scan() {
		text := strings.TrimSpace(in.Text())
		if text == "" {
			continue
		}
		m, err := chatMessage(text)
		if err == nil {
			m.ChatJID, m.Sender, m.SenderName = *jid, *as, *as
			var a local.Accepted
			if a, err = client.PostAccepted(ctx, m); err == nil {
				fmt.Fprintf(g.stderr, "  [id %s]\n", a.ID)
				if !a.Registered && !warned {
					fmt.Fprintf(g.stderr, "  [no group has %s, so nothing answers it: register it with 'nanoclawd groups add --jid %s --name NAME --folder FOLDER']\n", *jid, *jid)
					warned = true
				}
			}
		}
		if err != nil {
			fmt.Fprintln(g.stderr, "nanoclawd chat: not sent:", err)
		}
	}
	// Give a reply to the last line a moment to arrive before leaving.
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	return in.Err()
}

// latestSeq is the seq of the last message sent to jid so far.
func latestSeq(ctx context.Context, client *local.Client, jid string) (int64, error) {
	var after int64
	for {
		msgs, err := client.Sent(ctx, after, 0, jid)
		if err != nil || len(msgs) == 0 {
			return after, err
		}
		after = msgs[len(msgs)-1].Seq
	}
}

// chatMessage is what a typed line sends: text, or with /file, /voice or
// /react a file or a reaction, as WhatsApp would deliver them.
func chatMessage(line string) (local.Message, error) {
	verb, rest, _ := strings.Cut(line, " ")
	switch verb {
	case "/react":
		id, emoji, _ := strings.Cut(strings.TrimSpace(rest), " ")
		if id == "" || strings.TrimSpace(emoji) == "" {
			return local.Message{}, fmt.Errorf("write /react ID EMOJI, with the id shown after a message")
		}
		return local.Message{ReactTo: id, Emoji: strings.TrimSpace(emoji)}, nil
	case "/file", "/voice":
		path, caption, _ := strings.Cut(strings.TrimSpace(rest), " ")
		data, err := os.ReadFile(path)
		if err != nil {
			return local.Message{}, err
		}
		typ := mime.TypeByExtension(filepath.Ext(path))
		if typ == "" {
			typ = http.DetectContentType(data)
		}
		return local.Message{Text: strings.TrimSpace(caption), Media: &local.Media{Type: typ, Name: filepath.Base(path),
			DataBase64: base64.StdEncoding.EncodeToString(data), Voice: verb == "/voice"}}, nil
	}
	return local.Message{Text: line}, nil
}
