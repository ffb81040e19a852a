package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel/whatsapp"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/doctor"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
)

// whatsappLogin is 'nanoclawd whatsapp login'.
type whatsappLogin struct{}

func (whatsappLogin) Usage() string { return "whatsapp login [--phone NUMBER] [--owner NUMBER]" }

func (c whatsappLogin) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	phone := fs.String("phone", "", "pair by a code typed on the phone of this full international `NUMBER`, instead of a QR code")
	owner := fs.String("owner", "", "own-number mode: the owner's full international `NUMBER`; their chat with the assistant becomes the main group")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	var ownerChat string
	if *owner != "" {
		jid, err := whatsapp.OwnerJID(*owner)
		if err != nil {
			return err
		}
		ownerChat = jid.String()
	}
	own, err := whatsapp.Login(ctx, whatsapp.LoginOptions{DataDir: cfg.DataDir, Phone: *phone, Out: g.stdout})
	switch {
	case errors.Is(err, whatsapp.ErrAlreadyPaired):
		fmt.Fprintf(g.stdout, "WhatsApp is already paired as %s; to pair again, run 'nanoclawd whatsapp logout' first\n", own)
	case err != nil:
		return err
	default:
		fmt.Fprintf(g.stdout, "paired as %s\n", own)
	}
	restart := ""
	if !cfg.Channels.WhatsApp.Enabled {
		// Pairing is choosing WhatsApp (setup turned it off when the owner
		// chose another channel): a daemon started next connects it.
		if cfg, err = config.Set(cfg.File, "channels.whatsapp.enabled", true); err != nil {
			return fmt.Errorf("turn the WhatsApp channel on: %w", err)
		}
		fmt.Fprintf(g.stdout, "WhatsApp: on in %s\n", cfg.File)
		restart = "a running daemon started without WhatsApp: restart it to connect"
	}
	// The main group, when there is none yet: with --owner (the assistant
	// has a number of its own) the owner's chat with it; on a shared number
	// the owner's "message yourself" chat. With ownNumber and no --owner,
	// the bot's own chat would be a main group nobody writes in.
	main := groups.Group{JID: own.String(), Name: "Main (message yourself)", Folder: "main", Trigger: cfg.DefaultTrigger(), IsMain: true}
	switch {
	case ownerChat != "":
		main.JID, main.Name = ownerChat, "Main (owner)"
		if !cfg.Channels.WhatsApp.OwnNumber {
			fmt.Fprintf(g.stderr, "note: --owner is meant for an assistant with its own number; set channels.whatsapp.ownNumber to true in %s\n", cfg.File)
		}
	case cfg.Channels.WhatsApp.OwnNumber:
		fmt.Fprintln(g.stdout, "no main group registered: run 'nanoclawd whatsapp login --owner YOUR_NUMBER' to make your chat with the assistant the main group")
		return nil
	}
	existing, err := reg.Main(ctx)
	switch {
	case errors.Is(err, groups.ErrNotFound):
		if err := reg.Add(ctx, main); err != nil {
			return fmt.Errorf("register %s as the main group: %w (do it with 'nanoclawd groups add --main')", main.JID, err)
		}
		notifyDaemon(cfg)
		if ownerChat != "" {
			fmt.Fprintf(g.stdout, "registered your chat with the assistant (%s) as the main group \"main\": write to %s on WhatsApp to talk to %s\n", ownerChat, own.User, cfg.AssistantName)
		} else {
			fmt.Fprintf(g.stdout, "registered your own chat (%s) as the main group \"main\": message yourself on WhatsApp to talk to %s\n", own, cfg.AssistantName)
		}
	case err != nil:
		return err
	case existing.JID != main.JID && ownerChat != "":
		fmt.Fprintf(g.stdout, "a main group is already registered (%s, %s); to make %s main, remove it first with 'nanoclawd groups remove %s'\n", existing.Folder, existing.JID, ownerChat, existing.Folder)
	}
	fmt.Fprintln(g.stdout, cmp.Or(restart, "a running daemon connects with the new pairing by itself")+"; otherwise start it with 'nanoclawd run'")
	return nil
}

// whatsappLogout is 'nanoclawd whatsapp logout'.
type whatsappLogout struct{}

func (whatsappLogout) Usage() string { return "whatsapp logout" }

func (c whatsappLogout) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	if pid, _ := doctor.Daemon(cfg.DataDir); pid > 0 {
		return fmt.Errorf("the daemon (PID %d) is using the WhatsApp session in %s: stop it first, then run 'nanoclawd whatsapp logout' again", pid, cfg.DataDir)
	}
	own, err := whatsapp.Logout(ctx, cfg.DataDir, zerolog.Nop())
	switch {
	case errors.Is(err, whatsapp.ErrNotPaired):
		fmt.Fprintln(g.stdout, "WhatsApp is not paired; nothing to do")
		return nil
	case err != nil:
		return err
	}
	fmt.Fprintf(g.stdout, "unlinked %s and deleted the session; pair again with 'nanoclawd whatsapp login'\n", own)
	return nil
}

// whatsappGroup is one line of `whatsapp groups`.
type whatsappGroup struct {
	JID          string    `json:"jid"`
	Name         string    `json:"name"`
	LastActivity time.Time `json:"lastActivity"`
	Folder       string    `json:"folder"` // "" when not registered
}

// whatsappGroups is 'nanoclawd whatsapp groups'.
type whatsappGroups struct{}

func (whatsappGroups) Usage() string { return "whatsapp groups [--json]" }

func (c whatsappGroups) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	asJSON := fs.Bool("json", false, "print JSON: an array of {jid, name, lastActivity, folder}")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	_, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	chats, err := messages.New(db).ListChats(ctx)
	if err != nil {
		return fmt.Errorf("read the chat list: %w", err)
	}
	folders, err := foldersByJID(ctx, reg)
	if err != nil {
		return err
	}
	list := []whatsappGroup{}
	for _, c := range chats {
		if c.IsGroup && strings.HasSuffix(c.JID, "@g.us") {
			list = append(list, whatsappGroup{JID: c.JID, Name: c.Name, LastActivity: c.Time.UTC(), Folder: folders[c.JID]})
		}
	}
	if *asJSON {
		return writeJSON(g.stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(g.stdout, "no WhatsApp groups known yet: the daemon fetches the list when it connects (start it with 'nanoclawd run' after 'nanoclawd whatsapp login')")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JID\tNAME\tREGISTERED")
	for _, w := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", w.JID, w.Name, registeredAs(w.JID, w.Folder))
	}
	return tw.Flush()
}

// foldersByJID is the folder of each registered group's chat, for the
// lists of chats a channel has seen.
func foldersByJID(ctx context.Context, reg *groups.Registry) (map[string]string, error) {
	registered, err := reg.List(ctx)
	if err != nil {
		return nil, err
	}
	folders := map[string]string{}
	for _, gr := range registered {
		folders[gr.JID] = gr.Folder
	}
	return folders, nil
}

// registeredAs is a listed chat's REGISTERED column: the folder of the
// group that has it, or the command that registers it.
func registeredAs(jid, folder string) string {
	if folder != "" {
		return "as " + folder
	}
	return "no: nanoclawd groups add --jid " + jid + " --name NAME --folder FOLDER"
}
