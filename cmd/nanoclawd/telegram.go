package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
)

// telegramChats lists the Telegram chats the bot has seen, as the daemon
// recorded them in the database (so it works while the daemon runs).
type telegramChats struct{}

func (telegramChats) Usage() string { return "telegram chats [--json]" }

type telegramChat struct {
	telegram.Chat
	Folder string `json:"folder,omitempty"` // the group registered for it
}

func (c telegramChats) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	asJSON := fs.Bool("json", false, "print JSON: an array of {jid, title, type, username, lastSeen, folder}")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	_, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	chats, err := telegram.ListChats(ctx, db)
	if err != nil {
		return err
	}
	folders, err := foldersByJID(ctx, reg)
	if err != nil {
		return err
	}
	list := []telegramChat{}
	for _, ch := range chats {
		list = append(list, telegramChat{Chat: ch, Folder: folders[ch.JID]})
	}
	if *asJSON {
		return writeJSON(g.stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(g.stdout, "no Telegram chats seen yet: with channels.telegram.enabled and the daemon running, add the bot to a group or write to it; then run this again")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JID\tTITLE\tTYPE\tREGISTERED")
	for _, ch := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ch.JID, ch.Title, ch.Type, registeredAs(ch.JID, ch.Folder))
	}
	return tw.Flush()
}
