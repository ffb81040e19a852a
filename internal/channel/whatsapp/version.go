package whatsapp

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.mau.fi/whatsmeow"
	wastore "go.mau.fi/whatsmeow/store"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// versionFile, in dataDir, keeps the WhatsApp Web client version of the
// last connection WhatsApp accepted. It is used when the current version
// cannot be fetched, so a restart without web.whatsapp.com at hand does not
// fall back to the older version built into whatsmeow.
func versionFile(dataDir string) string { return layout.New(dataDir, "").WhatsAppVersion() }

// VersionFetcher returns the client version WhatsApp Web currently serves.
type VersionFetcher func(ctx context.Context) (wastore.WAVersionContainer, error)

// fetchLatestVersion asks web.whatsapp.com (whatsmeow.GetLatestVersion),
// the way mautrix-whatsapp does before it connects.
func fetchLatestVersion(ctx context.Context) (wastore.WAVersionContainer, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	v, err := whatsmeow.GetLatestVersion(ctx, &http.Client{Timeout: dialTimeout})
	if err != nil {
		return wastore.WAVersionContainer{}, err
	}
	return *v, nil
}

// useCurrentVersion makes whatsmeow announce the newest client version it
// can find out: fetched now, else the last good one saved in dataDir, else
// the one built into whatsmeow. WhatsApp refuses versions that are too old
// (405 "client outdated"), so without this a long-running install stops
// working until it is rebuilt. It returns the version in use and where it
// came from, for the log.
func useCurrentVersion(ctx context.Context, dataDir string, fetch VersionFetcher) (wastore.WAVersionContainer, string) {
	if fetch == nil {
		fetch = fetchLatestVersion
	}
	v, err := fetch(ctx)
	if err == nil && !v.IsZero() {
		if v.LessThan(wastore.GetWAVersion()) {
			return wastore.GetWAVersion(), "built in (newer than the fetched " + v.String() + ")"
		}
		wastore.SetWAVersion(v)
		return v, "fetched from web.whatsapp.com"
	}
	saved, serr := SavedVersion(dataDir)
	if dataDir == "" {
		serr = os.ErrNotExist
	}
	if serr == nil && !wastore.GetWAVersion().LessThan(saved) {
		return wastore.GetWAVersion(), fmt.Sprintf("built in (fetching the current one failed: %v)", err)
	}
	if serr == nil {
		wastore.SetWAVersion(saved)
		return saved, fmt.Sprintf("last good, from %s (fetching the current one failed: %v)", versionFile(dataDir), err)
	}
	return wastore.GetWAVersion(), fmt.Sprintf("built in (fetching the current one failed: %v)", err)
}

// saveVersion records the version of a connection WhatsApp accepted.
func saveVersion(dataDir string) error {
	if dataDir == "" {
		return nil
	}
	path := versionFile(dataDir)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(wastore.GetWAVersion().String()+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SavedVersion is the client version of the last accepted connection, as
// kept in <dataDir>/whatsapp.version.
func SavedVersion(dataDir string) (wastore.WAVersionContainer, error) {
	path := versionFile(dataDir)
	body, err := os.ReadFile(path)
	if err != nil {
		return wastore.WAVersionContainer{}, err
	}
	v, err := wastore.ParseVersion(strings.TrimSpace(string(body)))
	if err != nil {
		return v, fmt.Errorf("%s: %w (delete it; it is rewritten at the next connection)", path, err)
	}
	return v, nil
}

// BuiltinVersion is the client version whatsmeow was released with.
func BuiltinVersion() wastore.WAVersionContainer { return builtinVersion }

var builtinVersion = wastore.GetWAVersion()
