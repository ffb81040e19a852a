package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/channel/whatsapp"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

func init() {
	register("whatsapp login", "whatsapp login [--phone NUMBER]   pair WhatsApp by QR code, or by pairing code", whatsappLogin)
}

func whatsappLogin(ctx context.Context, g *globals, args []string) error {
	fs := flag.NewFlagSet("whatsapp login", flag.ContinueOnError)
	phone := fs.String("phone", "", "")
	if _, err := parseFlags(fs, args, 0, 0, "whatsapp login [--phone NUMBER]"); err != nil {
		return err
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	own, err := whatsapp.Login(ctx, whatsapp.LoginOptions{DataDir: cfg.DataDir, Phone: *phone, Out: g.stdout})
	switch {
	case errors.Is(err, whatsapp.ErrAlreadyPaired):
		fmt.Fprintf(g.stdout, "WhatsApp is already paired as %s; to pair again, unlink this device on the phone (Linked devices) and run this again\n", own)
	case err != nil:
		return err
	default:
		fmt.Fprintf(g.stdout, "paired as %s\n", own)
	}
	// The owner's "message yourself" chat becomes the main group when there
	// is none yet, so the owner can talk to the assistant straight away.
	if _, err := reg.Main(ctx); errors.Is(err, groups.ErrNotFound) {
		main := groups.Group{JID: own.String(), Name: "Main (message yourself)", Folder: "main", Trigger: cfg.DefaultTrigger(), IsMain: true}
		if err := reg.Add(ctx, main); err != nil {
			return fmt.Errorf("register your own chat as the main group: %w (do it with 'nanoclawd groups add --main')", err)
		}
		notifyDaemon(cfg)
		fmt.Fprintf(g.stdout, "registered your own chat (%s) as the main group \"main\": message yourself on WhatsApp to talk to %s\n", own, cfg.AssistantName)
	}
	fmt.Fprintln(g.stdout, "restart the daemon (or start it with 'nanoclawd run') to connect")
	return nil
}
