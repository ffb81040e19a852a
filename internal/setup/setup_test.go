package setup_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/setup"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

// newGuide is a guide over a real registry in a temp dir, answering from
// input, with the environment env (changed by Setenv) and the credential
// check going to api ("" = unreachable).
func newGuide(t *testing.T, whatsapp, local bool, input string, env map[string]string, api string) (*setup.Guide, *strings.Builder) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.File = filepath.Join(dir, "nanoclaw.config.jsonc")
	cfg.DataDir, cfg.GroupsDir = filepath.Join(dir, "data"), filepath.Join(dir, "groups")
	cfg.Channels.WhatsApp.Enabled, cfg.Channels.Local.Enabled = whatsapp, local
	cfg.Agent.Env = []string{setup.APIKeyVar}
	db, err := store.Open(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if api == "" {
		api = "http://127.0.0.1:1" // nothing listens there
	}
	out := &strings.Builder{}
	return &setup.Guide{
		Config: &cfg, Groups: groups.New(db, cfg.GroupsDir),
		Pairer: &mock.Pairer{
			PairedFn: func(context.Context) (string, bool, error) { return "", false, nil },
			PairFn: func(context.Context, string, io.Writer) (string, error) {
				t.Error("Pair called")
				return "", errors.New("no")
			},
		},
		Cred: setup.Credentials{
			EnvFile: filepath.Join(dir, "nanoclawd.env"), APIBase: api,
			Getenv: func(k string) string { return env[k] },
			Setenv: func(k, v string) error { env[k] = v; return nil },
		},
		In: bufio.NewReader(strings.NewReader(input)), Out: out,
	}, out
}

func TestLocalMainChatWhenWhatsAppIsDisabled(t *testing.T) {
	env := map[string]string{}
	g, out := newGuide(t, false, true, "\n\n", env, "")
	ctx := context.Background()
	missing, err := g.Missing(ctx)
	if err != nil || len(missing) != 2 || missing[0].Step != "main chat" || missing[1].Step != "credential" {
		t.Fatalf("missing: %v %v", missing, err)
	}
	if err := g.Run(ctx, false); err != nil {
		t.Fatal(err)
	}
	m, err := g.Groups.Main(ctx)
	if err != nil || m.JID != "local:main" || m.Folder != "main" {
		t.Fatalf("main: %+v %v\n%s", m, err, out)
	}
	for _, want := range []string{"- WhatsApp: disabled", "1) a chat on the local channel, local:main", "✗ model credential: none (skipped)\n",
		"\nNo first answer yet: agents have no model credential, so they cannot answer: run 'nanoclawd setup' and paste an API key or OAuth token.\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	// Without a credential no first answer can come: none is offered.
	if strings.Contains(out.String(), "For a first answer") || strings.Contains(out.String(), "chat --chat") {
		t.Errorf("offered a first answer that cannot come:\n%s", out)
	}
	if missing, _ := g.Missing(ctx); len(missing) != 1 {
		t.Errorf("after setup, missing: %v", missing)
	}
}

// WhatsApp skipped, the local channel off and no config file yet: the
// guide offers a local main chat, turns the channel on and the unpaired
// WhatsApp off in a config made from the template (its comments kept),
// and ends with the command to chat. Run again, it asks for nothing about
// WhatsApp: the first answer does not need it.
func TestLocalChannelOfferedWhenWhatsAppIsSkipped(t *testing.T) {
	g, out := newGuide(t, true, false, "s\n\n", map[string]string{setup.APIKeyVar: "sk-ant-api03-x"}, "")
	g.Command = "bin/nanoclawd"
	ctx := context.Background()
	if err := g.Run(ctx, true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"✗ WhatsApp: not paired (skipped)", "1) a chat on the local channel, local:main: talk to it in a terminal on this machine (this turns the local channel on in " + g.Config.File + ")",
		"✓ local channel: on in " + g.Config.File, "✓ WhatsApp: off in " + g.Config.File + ", since the main chat is on the local channel ('bin/nanoclawd whatsapp login' pairs it and turns it on)",
		"✓ main chat: Main (local) (local:main)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); lines[len(lines)-1] != "bin/nanoclawd chat --chat local:main" {
		t.Errorf("the last line is %q, want the command to chat", lines[len(lines)-1])
	}
	if cfg, err := config.Load(g.Config.File); err != nil || !cfg.Channels.Local.Enabled || !g.Config.Channels.Local.Enabled || cfg.Channels.WhatsApp.Enabled {
		t.Errorf("the config file: %+v, %v; in force: %v", cfg, err, g.Config.Channels.Local.Enabled)
	}
	if b, _ := os.ReadFile(g.Config.File); !strings.Contains(string(b), "// Connect to WhatsApp (pair first with `nanoclawd whatsapp login`).\n      \"enabled\": false,") {
		t.Errorf("WhatsApp is not turned off in place, its comment kept:\n%s", b)
	}
	if missing, err := g.Missing(ctx); err != nil || len(missing) != 0 {
		t.Errorf("missing after setup: %v %v", missing, err)
	}
	out.Reset()
	g.In = bufio.NewReader(strings.NewReader("\n"))
	if err := g.Run(ctx, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "- WhatsApp: disabled (channels.whatsapp.enabled is false)") ||
		strings.Contains(out.String(), "Pair WhatsApp now") || !strings.Contains(out.String(), "Start the daemon with 'make run' (or 'bin/nanoclawd run'") {
		t.Errorf("run again:\n%s", out)
	}
}

func TestPairingFailsThenWorks(t *testing.T) {
	g, out := newGuide(t, true, false, "x\np\n+49 170 1234567\nq\n1\n", map[string]string{setup.APIKeyVar: "sk-ant-api03-x"}, "")
	calls := 0
	g.Pairer = &mock.Pairer{
		PairedFn: func(context.Context) (string, bool, error) { return "", false, nil },
		PairFn: func(_ context.Context, phone string, _ io.Writer) (string, error) {
			calls++
			if calls == 1 {
				if phone != "+49 170 1234567" {
					t.Errorf("phone %q", phone)
				}
				return "", errors.New("cannot reach WhatsApp")
			}
			return "4917@s.whatsapp.net", nil
		},
	}
	if err := g.Run(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"x" is not one of q, p, s`, "Pairing did not work: cannot reach WhatsApp", "✓ WhatsApp: paired as +4917", "message yourself on WhatsApp (the chat with your own number, +4917): hello Andy"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out.String(), "Start the daemon") {
		t.Errorf("told to start the daemon that starts next:\n%s", out)
	}
}

func TestInputEndsIsAnError(t *testing.T) {
	g, _ := newGuide(t, true, false, "", map[string]string{}, "")
	if err := g.Run(context.Background(), false); err == nil || !strings.Contains(err.Error(), "on a terminal") {
		t.Fatalf("err = %v", err)
	}
}

func TestCredentialUnreachableIsSavedUnchecked(t *testing.T) {
	env := map[string]string{}
	g, out := newGuide(t, false, true, "s\nsk-ant-oat01-token\n", env, "")
	os.WriteFile(g.Cred.EnvFile, []byte("# mine\nGH_TOKEN=x\nCLAUDE_CODE_OAUTH_TOKEN=old\n"), 0o600)
	if err := g.Run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if env[setup.OAuthTokenVar] != "sk-ant-oat01-token" {
		t.Errorf("env: %v", env)
	}
	b, _ := os.ReadFile(g.Cred.EnvFile)
	if string(b) != "# mine\nGH_TOKEN=x\nCLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-token\n" {
		t.Errorf("env file:\n%s", b)
	}
	for _, want := range []string{"- model credential: CLAUDE_CODE_OAUTH_TOKEN saved in " + g.Cred.EnvFile + ", not checked: the API could not be reached",
		"✓ agent.env: agents are handed CLAUDE_CODE_OAUTH_TOKEN"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out.String(), "✓ model credential") {
		t.Errorf("an unchecked credential got a ✓:\n%s", out)
	}
	if cfg, err := config.Load(g.Config.File); err != nil || !slices.Equal(cfg.Agent.Env, []string{setup.APIKeyVar, setup.OAuthTokenVar}) {
		t.Errorf("agent.env in the config file: %+v, %v", cfg, err)
	}
}

func TestCredentialFromEnvironmentRejected(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("anthropic-version") == "" {
			t.Errorf("headers: %v", r.Header)
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer api.Close()
	env := map[string]string{setup.APIKeyVar: "sk-ant-api03-revoked"}
	g, out := newGuide(t, false, true, "\n", env, api.URL)
	if err := g.Run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "✗ model credential: ANTHROPIC_API_KEY from the environment: the API rejected it (401 Unauthorized") ||
		!strings.Contains(out.String(), "\nNo first answer yet: the API refuses ANTHROPIC_API_KEY, and the environment wins over "+g.Cred.EnvFile+": unset ANTHROPIC_API_KEY there") ||
		strings.Contains(out.String(), "For a first answer") {
		t.Errorf("output:\n%s", out)
	}
	if _, err := os.Stat(g.Cred.EnvFile); err == nil {
		t.Error("wrote the env file although the credential comes from the environment")
	}
}

// A chat's network is named as the config names its channel, by the JID
// alone: the console, doctor and setup all ask Network.
func TestNetworkNamesTheChannelOfAJID(t *testing.T) {
	for jid, want := range map[string]string{"local:main": "local", "tg:-1001234567890": "telegram", "tg:42": "telegram",
		"120363401234567890@g.us": "whatsapp", "4915112345678@s.whatsapp.net": "whatsapp"} {
		if got := setup.Network(jid); got != want {
			t.Errorf("Network(%q) = %q, want %q", jid, got, want)
		}
	}
}
