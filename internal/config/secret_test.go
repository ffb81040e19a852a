package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// looksSecret is a JSON key that names a secret. A string field so named
// must be tagged secret, or be listed in notSecret with the reason.
var looksSecret = regexp.MustCompile(`(?i)token|key|secret|credential|password|passwd|auth|url`)

var notSecret = map[string]string{
	"console.tls.key":  "the path of the key file, not the key",
	"providers.*.auth": "the header scheme, x-api-key or bearer",
}

// secretFields fills every field of v tagged secret with a value of its
// own, named by key, and returns the values.
func secretFields(t *testing.T, v reflect.Value, key string) []string {
	t.Helper()
	var out []string
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			k := strings.TrimPrefix(key+"."+name, ".")
			secret := fmt.Sprintf("secret-%d-%s", len(k), strings.ReplaceAll(k, "*", "x"))
			switch f.Tag.Get("secret") {
			case "true":
				v.Field(i).SetString(secret)
				out = append(out, secret)
			case "url":
				v.Field(i).SetString("https://user:" + secret + "-pw@example.com/v1?key=" + secret + "-q#" + secret + "-frag")
				out = append(out, secret)
			case "":
				if f.Type.Kind() == reflect.String && looksSecret.MatchString(name) && notSecret[k] == "" {
					t.Errorf("%s looks like a secret but has no secret tag (or add it to notSecret with the reason)", k)
				}
				out = append(out, secretFields(t, v.Field(i), k)...)
			}
		}
	case reflect.Map:
		e := reflect.New(v.Type().Elem()).Elem()
		got := secretFields(t, e, key+".*")
		if len(got) > 0 {
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			v.SetMapIndex(reflect.ValueOf("one"), e)
			out = append(out, got...)
		}
	}
	return out
}

// Every field tagged secret, however deep (a provider's credential inside
// the providers map), is hidden in the config as status shows it.
func TestMaskedHidesEverySecret(t *testing.T) {
	cfg := Default()
	secrets := secretFields(t, reflect.ValueOf(&cfg).Elem(), "")
	for _, want := range []string{"channels.telegram.token", "console.metricsToken", "providers.*.credential", "providers.*.url",
		"media.transcribe.apiKey", "media.transcribe.url"} {
		if !slices.Contains(SecretKeys(), want) {
			t.Errorf("%s is not tagged secret", want)
		}
	}
	b, err := json.Marshal(cfg.Masked())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			t.Errorf("the masked config shows %s:\n%s", s, b)
		}
	}
	// The original keeps its values; what is not secret stays readable.
	if cfg.Console.MetricsToken == SecretShown || cfg.Providers["one"].Credential == SecretShown {
		t.Error("Masked changed the config it copied")
	}
	if m := cfg.Masked(); m.Providers["one"].URL != "https://user:%28set%29@example.com/v1?key=%28set%29" || m.Console.MetricsToken != SecretShown {
		t.Errorf("masked: provider URL %q, metrics token %q", m.Providers["one"].URL, m.Console.MetricsToken)
	}
}

func TestMaskedLeavesUnsetSecretsEmpty(t *testing.T) {
	cfg := Default()
	m := cfg.Masked()
	if m.Console.MetricsToken != "" || m.Channels.Telegram.Token != "" || m.Channels.Telegram.APIURL != cfg.Channels.Telegram.APIURL {
		t.Errorf("unset secrets shown as %q %q, apiURL %q", m.Console.MetricsToken, m.Channels.Telegram.Token, m.Channels.Telegram.APIURL)
	}
}
