package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A secret of the config can come from nanoclawd.env: it is read before
// the config's ${VAR} are expanded, at the start and at each reload; the
// process's own environment wins over it; a variable the file no longer
// holds is gone; a file others can read is refused.
func TestEnvFileBeforeTheConfig(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "nanoclaw.config.jsonc")
	env := EnvFile(cfgFile)
	const token, key, own = "NANOCLAWD_TEST_METRICS_TOKEN", "NANOCLAWD_TEST_KEY", "NANOCLAWD_TEST_OWN"
	t.Setenv(own, "from the environment")
	for _, n := range []string{token, key} {
		t.Cleanup(func() { os.Unsetenv(n) })
	}
	os.WriteFile(cfgFile, []byte(`{"console": {"metricsToken": "${`+token+`}"}}`), 0o600)
	os.WriteFile(env, []byte(token+"=t-one\n"+key+"=k-one\n"+own+"=from the file\n"), 0o600)

	cfg, err := Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Console.MetricsToken != "t-one" {
		t.Errorf("console.metricsToken = %q, want the env file's", cfg.Console.MetricsToken)
	}
	if os.Getenv(own) != "from the environment" || slices.Contains(FromEnvFile(), own) {
		t.Errorf("the env file overrode the environment: %q", os.Getenv(own))
	}

	os.WriteFile(env, []byte(token+"=t-two\n"), 0o600)
	next, live, _, err := Reload(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if next.Console.MetricsToken != "t-two" {
		t.Errorf("after a reload console.metricsToken = %q, want the env file's new one", next.Console.MetricsToken)
	}
	if _, set := os.LookupEnv(key); set {
		t.Errorf("%s stays set after it left the file", key)
	}
	want := []string{"console.metricsToken", "nanoclawd.env " + key, "nanoclawd.env " + token}
	if !slices.Equal(live, want) {
		t.Errorf("the reload lists %q, want %q", live, want)
	}

	os.Chmod(env, 0o644)
	if _, _, _, err := Reload(next); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("an env file others can read: %v", err)
	}
}
