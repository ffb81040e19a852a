package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	waLog "go.mau.fi/whatsmeow/util/log"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// StoreFile is whatsmeow's own SQLite file in dataDir: its keys and
// sessions live apart from nanoclaw.db so either can be reset alone.
func StoreFile(dataDir string) string { return layout.New(dataDir, "").WhatsAppDB() }

// dialTimeout bounds the websocket handshake, so a machine without a route
// to WhatsApp hears so in seconds instead of hanging.
const dialTimeout = 15 * time.Second

func init() {
	// What the phone's "Linked devices" list shows for us.
	wastore.SetOSInfo("nanoclawd", [3]uint32{1, 0, 0})
}

// openStore opens (creating) <dataDir>/whatsapp.db with foreign keys on,
// which whatsmeow's sqlstore insists on, and returns its only device.
func openStore(ctx context.Context, dataDir string, log zerolog.Logger) (*sqlstore.Container, *wastore.Device, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	path := StoreFile(dataDir)
	container, err := sqlstore.New(ctx, "sqlite3", store.DSN(path), waLog.Zerolog(atMostInfo(log)).Sub("Store"))
	if err != nil {
		return nil, nil, fmt.Errorf("open WhatsApp store %s: %w", path, err)
	}
	device, err := container.GetFirstDevice(ctx)
	if err != nil {
		container.Close()
		return nil, nil, fmt.Errorf("read WhatsApp store %s: %w", path, err)
	}
	return container, device, nil
}

// clearStore removes whatsapp.db and its WAL files: after a logout the keys
// in it are worthless and the next login starts clean.
func clearStore(dataDir string) error {
	var errs []error
	for _, p := range layout.SQLiteFiles(StoreFile(dataDir)) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Paired reports the account this dataDir is paired with (its phone-number
// JID, e.g. 491701234567@s.whatsapp.net), or ErrNotPaired.
func Paired(ctx context.Context, dataDir string) (types.JID, error) {
	container, device, err := openStore(ctx, dataDir, zerolog.Nop())
	if err != nil {
		return types.JID{}, err
	}
	defer container.Close()
	if device.ID == nil {
		return types.JID{}, ErrNotPaired
	}
	return device.ID.ToNonAD(), nil
}

// newClient makes a whatsmeow client whose websocket dials give up after
// dialTimeout (proxies from the environment still apply). whatsmeow logs in
// two ways: through the waLog logger it is given, and, in its newer code
// (app state, receipts, retries, LID mapping), through zerolog.Ctx of the
// context it works in — BackgroundEventCtx when it has none from us. Both
// get our logger, capped at info; without the second, those lines would go
// to zerolog's default context logger, which drops them.
func newClient(device *wastore.Device, log zerolog.Logger) *whatsmeow.Client {
	cli := whatsmeow.NewClient(device, waLog.Zerolog(atMostInfo(log)).Sub("Client"))
	cli.BackgroundEventCtx = withWhatsmeowLog(context.Background(), log)
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: dialTimeout}
	cli.SetWebsocketHTTPClient(hc)
	cli.SetPreLoginHTTPClient(hc)
	return cli
}

// withWhatsmeowLog is ctx carrying the logger whatsmeow finds with
// zerolog.Ctx: ours, capped at info. A connection's ctx must carry it too,
// since whatsmeow handles everything the connection receives in that ctx.
func withWhatsmeowLog(ctx context.Context, log zerolog.Logger) context.Context {
	return atMostInfo(log).With().Str("sublogger", "Client").Logger().WithContext(ctx)
}

// atMostInfo keeps whatsmeow's debug output (a line per message and
// frame) out of the log, whatever level nanoclawd itself logs at.
func atMostInfo(log zerolog.Logger) zerolog.Logger {
	if log.GetLevel() < zerolog.InfoLevel {
		return log.Level(zerolog.InfoLevel)
	}
	return log
}
