package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/nanoclawd/nanoclawd/internal/channel/whatsapp"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/setup"
)

// WhatsApp checks pairing; when a daemon runs (daemonPID > 0) it adds the
// connection state the daemon last wrote. Unpaired is something to fix
// only when the registered groups need WhatsApp (setup.NeedsWhatsApp): a
// main chat on another channel answers without it.
func WhatsApp(ctx context.Context, cfg *config.Config, daemonPID int, registered []groups.Group) Result {
	if !cfg.Channels.WhatsApp.Enabled {
		return ok("whatsapp", "disabled (channels.whatsapp.enabled is false)")
	}
	notPaired := fix("whatsapp", "not paired: run 'nanoclawd whatsapp login' or 'nanoclawd setup' (or set channels.whatsapp.enabled to false to use only the local channel or Telegram)")
	if !setup.NeedsWhatsApp(registered) {
		notPaired = ok("whatsapp", "not paired, and no registered chat is on WhatsApp: set channels.whatsapp.enabled to false, or pair with 'nanoclawd whatsapp login'")
		notPaired.Warn = true // the daemon warns about it at every start
	}
	// Pairing lives in whatsapp.db; without it there is nothing to open
	// (and opening would create it).
	if _, err := os.Stat(whatsapp.StoreFile(cfg.DataDir)); errors.Is(err, fs.ErrNotExist) {
		return notPaired
	}
	own, err := whatsapp.Paired(ctx, cfg.DataDir)
	if errors.Is(err, whatsapp.ErrNotPaired) {
		return notPaired
	}
	if err != nil {
		return fix("whatsapp", "%v", err)
	}
	r := ok("whatsapp", "paired as %s; %s", own, clientVersion(cfg.DataDir))
	if daemonPID > 0 {
		if line, pid, err := whatsapp.ReadStatus(cfg.DataDir); err == nil && pid == daemonPID {
			r.Detail += "; daemon: " + line
		}
	}
	return r
}

// clientVersion says which WhatsApp Web version the daemon announces.
func clientVersion(dataDir string) string {
	v, err := whatsapp.SavedVersion(dataDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("client version: none accepted yet (the daemon fetches the current one at start; built in: %s)", whatsapp.BuiltinVersion())
	case err != nil:
		return err.Error()
	}
	return fmt.Sprintf("client version %s (the last one WhatsApp accepted; the daemon fetches the current one at every start)", v)
}
