package whatsapp

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types/events"
	waLog "go.mau.fi/whatsmeow/util/log"
)

// The client version: fetched when possible, else the last one WhatsApp
// accepted (kept in the data dir), else whatsmeow's built-in one; and a
// connection WhatsApp accepts records the version it used.
func TestClientVersion(t *testing.T) {
	builtin := BuiltinVersion()
	t.Cleanup(func() { wastore.SetWAVersion(builtin) })
	newer := func(n uint32) wastore.WAVersionContainer {
		return wastore.WAVersionContainer{builtin[0], builtin[1], builtin[2] + n}
	}
	ok := func(v wastore.WAVersionContainer) VersionFetcher {
		return func(context.Context) (wastore.WAVersionContainer, error) { return v, nil }
	}
	offline := func(context.Context) (wastore.WAVersionContainer, error) {
		return wastore.WAVersionContainer{}, errors.New("dial tcp: no route to host")
	}
	ctx := context.Background()
	dir := t.TempDir()

	// Nothing saved, offline: the built-in version, and the log says why.
	v, src := useCurrentVersion(ctx, dir, offline)
	if v != builtin || !strings.Contains(src, "built in") || !strings.Contains(src, "no route to host") {
		t.Errorf("offline, nothing saved: %v (%s)", v, src)
	}

	// Fetched: used, and saved once WhatsApp accepts a connection with it.
	v, src = useCurrentVersion(ctx, dir, ok(newer(5)))
	if v != newer(5) || wastore.GetWAVersion() != newer(5) || !strings.Contains(src, "fetched") {
		t.Errorf("fetched: %v (%s), whatsmeow uses %v", v, src, wastore.GetWAVersion())
	}
	c := New(Options{DataDir: dir, Clock: newFakeClock()})
	c.handleEvent(&events.Connected{})
	if saved, err := SavedVersion(dir); err != nil || saved != newer(5) {
		t.Fatalf("saved version = %v, %v; want %v", saved, err, newer(5))
	}

	// A new process (whatsmeow back at its built-in version) that cannot
	// fetch uses the saved one.
	wastore.SetWAVersion(builtin)
	v, src = useCurrentVersion(ctx, dir, offline)
	if v != newer(5) || wastore.GetWAVersion() != newer(5) || !strings.Contains(src, versionFile(dir)) {
		t.Errorf("offline with a saved version: %v (%s)", v, src)
	}

	// A damaged file is an error that says what to do, and is not used.
	os.WriteFile(versionFile(dir), []byte("two point three\n"), 0o600)
	if _, err := SavedVersion(dir); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("SavedVersion of a damaged file = %v", err)
	}
	wastore.SetWAVersion(builtin)
	if v, _ := useCurrentVersion(ctx, dir, offline); v != builtin {
		t.Errorf("damaged file: using %v, want the built-in %v", v, builtin)
	}
}

// whatsmeow's debug lines never reach the log; its warnings do.
func TestWhatsmeowLogCappedAtInfo(t *testing.T) {
	var buf strings.Builder
	log := atMostInfo(zerolog.New(&buf).Level(zerolog.DebugLevel))
	waLog.Zerolog(log).Debugf("frame %d", 1)
	waLog.Zerolog(log).Warnf("socket %s", "closed")
	if strings.Contains(buf.String(), "frame") || !strings.Contains(buf.String(), "socket closed") {
		t.Errorf("log = %q", buf.String())
	}
	if quiet := atMostInfo(zerolog.New(&buf).Level(zerolog.ErrorLevel)); quiet.GetLevel() != zerolog.ErrorLevel {
		t.Error("a stricter level was loosened")
	}
}

// whatsmeow's newer code logs through zerolog.Ctx: the client's background
// context and a connection's context carry our logger, capped at info too.
func TestWhatsmeowContextLogger(t *testing.T) {
	var buf strings.Builder
	log := zerolog.New(&buf).Level(zerolog.DebugLevel)
	cli := newClient(&wastore.Device{}, log)
	for name, ctx := range map[string]context.Context{
		"BackgroundEventCtx": cli.BackgroundEventCtx,
		"connection":         withWhatsmeowLog(context.Background(), log),
	} {
		buf.Reset()
		zerolog.Ctx(ctx).Debug().Msg("receipt handled")
		zerolog.Ctx(ctx).Warn().Msg("app state conflict")
		out := buf.String()
		if strings.Contains(out, "receipt handled") || !strings.Contains(out, "app state conflict") || !strings.Contains(out, `"sublogger":"Client"`) {
			t.Errorf("%s: log = %q", name, out)
		}
	}
}
