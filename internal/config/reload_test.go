package config

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestDiffSplitsLiveAndRestartKeys(t *testing.T) {
	a, b := Default(), Default()
	b.AssistantName = "Bob"
	b.Channels.Local.Enabled = true
	b.Agent.MaxConcurrent = 9
	b.Agent.IdleTimeout = Duration(time.Minute)
	b.Agent.Command = []string{"node", "other.js"}
	b.HostSecurity.Network.AllowedDomains = []string{"example.com"}
	b.Alerts.Cooldown = Duration(time.Hour)
	live, restart := Diff(&a, &b)
	wantLive := []string{"agent.command", "agent.idleTimeout", "hostSecurity.network.allowedDomains"}
	wantRestart := []string{"agent.maxConcurrent", "alerts.cooldown", "assistantName", "channels.local.enabled"}
	if !slices.Equal(live, wantLive) || !slices.Equal(restart, wantRestart) {
		t.Errorf("Diff = live %v, restart %v; want %v, %v", live, restart, wantLive, wantRestart)
	}
	if l, r := Diff(&a, &a); len(l)+len(r) != 0 {
		t.Errorf("a config differs from itself: %v %v", l, r)
	}
}

func TestKeepRestartOnlyKeepsRunningValues(t *testing.T) {
	old, next := Default(), Default()
	next.AssistantName, next.DataDir, next.Timezone = "Bob", "/elsewhere", "Europe/Paris"
	next.Agent.MaxConcurrent, next.Agent.Warm = 9, 3
	next.Alerts.MaxPerGroup = 7
	next.KeepRestartOnly(&old)
	if next.AssistantName != "Andy" || next.DataDir != "data" || next.Timezone != "" ||
		next.Agent.MaxConcurrent != 5 || next.Alerts.MaxPerGroup != 3 {
		t.Errorf("restart-only keys not kept: %+v", next)
	}
	if next.Agent.Warm != 3 {
		t.Errorf("a live key was reset: agent.warm = %d", next.Agent.Warm)
	}
}

func TestReloadReadsTheFileAgain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.jsonc")
	if err := os.WriteFile(file, []byte(`{"assistantName": "Andy", "agent": {"warm": 0}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changes, err := Watch(ctx, file)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(file, []byte(`{"assistantName": "Bob", "agent": {"warm": 2}}`), 0o600)
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("the edit was not seen")
	}
	cfg, live, restart, err := Reload(old)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(live, []string{"agent.warm"}) || !slices.Equal(restart, []string{"assistantName"}) {
		t.Errorf("live %v restart %v", live, restart)
	}
	if cfg.Agent.Warm != 2 || cfg.AssistantName != "Andy" {
		t.Errorf("reloaded: warm %d, name %q", cfg.Agent.Warm, cfg.AssistantName)
	}
	os.WriteFile(file, []byte(`{"assistantName": `), 0o600)
	if _, _, _, err := Reload(old); err == nil {
		t.Error("an invalid edit reloaded")
	}
}
