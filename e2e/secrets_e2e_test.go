package e2e_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// With every secret the config can hold set, neither `status --json` nor
// `status` shows any of them. The keys come from the config's own secret
// tags: a secret key added there and not set here fails the test.
func TestStatusShowsNoSecret(t *testing.T) {
	secret := func(name string) string { return name + "-" + randHex(t) }
	// A Telegram token has its shape: digits, ":", 35 URL-safe characters.
	tg := "123456789:" + strings.Repeat("A", 35-16) + randHex(t)
	set := map[string]string{
		"channels.telegram.token":  tg,
		"channels.telegram.apiURL": secret("tgurl"),
		"console.metricsToken":     secret("metrics"),
		"media.transcribe.apiKey":  secret("whisperkey"),
		"media.transcribe.url":     secret("whisperurl"),
		"providers.*.credential":   secret("credential"),
		"providers.*.url":          secret("providerurl"),
	}
	if keys := slices.Sorted(maps.Keys(set)); !slices.Equal(keys, slices.Sorted(slices.Values(config.SecretKeys()))) {
		t.Fatalf("the config's secrets are %v; this test sets %v: set the new one below too", config.SecretKeys(), keys)
	}
	// A URL carries its secret as a password and as a query value.
	inURL := func(k string) string { return `"https://user:` + set[k] + `@example.com/v1?key=` + set[k] + `"` }
	in := e2e.New(t, e2e.Options{
		Channels: `"whatsapp": {"enabled": false}, "telegram": {"enabled": false, "token": "` + set["channels.telegram.token"] + `", "apiURL": ` +
			inURL("channels.telegram.apiURL") + `}`,
		Media: `"transcribe": {"url": ` + inURL("media.transcribe.url") + `, "apiKey": "` + set["media.transcribe.apiKey"] + `"}`,
		Top: `"console": {"listen": "127.0.0.1:0", "metricsToken": "` + set["console.metricsToken"] + `"}, ` +
			`"providers": {"work": {"url": ` + inURL("providers.*.url") + `, "credential": "` + set["providers.*.credential"] + `"}}`,
	})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	for _, args := range [][]string{{"status", "--json"}, {"status"}} {
		out := in.CLI(args...)
		if len(args) > 1 && !strings.Contains(out, "example.com") {
			t.Fatalf("%v does not show the config it should mask:\n%s", args, out)
		}
		for k, v := range set {
			if strings.Contains(out, v) {
				t.Errorf("%v shows %s:\n%s", args, k, out)
			}
		}
	}
}
