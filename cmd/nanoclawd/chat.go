package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
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
		for ctx.Err() == nil {
			msgs, err := client.Sent(ctx, after, 30*time.Second, *jid)
			if err != nil {
				if ctx.Err() == nil {
					fmt.Fprintln(g.stderr, "nanoclawd chat:", err)
					time.Sleep(time.Second) // the daemon may be restarting: ask again soon, not in a tight loop
				}
				continue
			}
			for _, m := range msgs {
				after = max(after, m.Seq)
				fmt.Fprintf(g.stdout, "%s: %s\n", cfg.AssistantName, m.Text)
				if m.File != "" {
					fmt.Fprintf(g.stdout, "  [file %s, %s, %d bytes: GET /files/%d on the socket]\n", m.File, m.FileType, m.FileBytes, m.Seq)
				}
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
		if _, err := client.Post(ctx, local.Message{ChatJID: *jid, Sender: *as, SenderName: *as, Text: text}); err != nil {
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
