package spec

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

func TestAgentSpec(t *testing.T) {
	cfg := &config.Config{
		AssistantName: "Andy", DataDir: "/d", GroupsDir: "/g",
		Agent: config.Agent{Command: []string{"node", "agent.js"}, Env: []string{"HTTPS_PROXY", "UNSET", "GITHUB_TOKEN"},
			Timeout: config.Duration(time.Hour), IdleTimeout: config.Duration(time.Minute)},
	}
	withTZ := *cfg
	withTZ.Timezone = "Europe/Berlin"
	host := map[string]string{"HTTPS_PROXY": "http://proxy", "HOME": "/root", "GITHUB_TOKEN": "ghp-secret"}
	getenv := func(name string) (string, bool) { v, ok := host[name]; return v, ok }
	main := groups.Group{Folder: "main", JID: "local:main", IsMain: true}
	fam := groups.Group{Folder: "family", JID: "local:family"}
	// As security.Resolve sorts agent.env: GITHUB_TOKEN looks like a
	// secret and is held back from the confined group, not from main.
	pol := security.Effective{Group: "family", Tools: []string{"Read"}, SDKOptions: map[string]any{"tools": []string{"Read"}},
		Env: security.EnvPolicy{Enter: []security.EnvVar{{Name: "HTTPS_PROXY"}, {Name: "UNSET"}}, HeldBack: []security.EnvVar{{Name: "GITHUB_TOKEN"}}}}
	mainPol := security.Effective{Group: "main", IsMain: true,
		Env: security.EnvPolicy{Enter: []security.EnvVar{{Name: "HTTPS_PROXY"}, {Name: "UNSET"}, {Name: "GITHUB_TOKEN"}}}}
	base := map[string]string{
		"NANOCLAW_GROUP_FOLDER": "family", "NANOCLAW_CHAT_JID": "local:family", "NANOCLAW_IS_MAIN": "0",
		"NANOCLAW_GROUP_DIR": "/g/family", "NANOCLAW_IPC_DIR": "/d/ipc/family", "NANOCLAW_IPC_TOKEN": "tok",
		"NANOCLAW_BIN": "/bin/nanoclawd", "NANOCLAW_SESSION_DIR": "/d/sessions/family",
		"NANOCLAW_GLOBAL_MEMORY": "/g/global/CLAUDE.md", "HTTPS_PROXY": "http://proxy",
	}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := maps.Clone(m)
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	tests := []struct {
		name        string
		in          Input
		env         map[string]string
		security    bool // the policy goes along in the input (non-main groups)
		session     string
		task, stand bool
	}{
		{name: "group", in: Input{Group: fam, Config: cfg, Policy: pol, Prompt: "hi"}, env: base, security: true},
		{name: "main has no global memory and no policy in its input",
			in: Input{Group: main, Config: cfg, Policy: mainPol, Prompt: "hi"},
			env: with(base, "GITHUB_TOKEN", "ghp-secret", "NANOCLAW_GROUP_FOLDER", "main", "NANOCLAW_CHAT_JID", "local:main", "NANOCLAW_IS_MAIN", "1",
				"NANOCLAW_GROUP_DIR", "/g/main", "NANOCLAW_IPC_DIR", "/d/ipc/main", "NANOCLAW_SESSION_DIR", "/d/sessions/main",
				"NANOCLAW_GLOBAL_MEMORY", "")},
		{name: "timezone", in: Input{Group: fam, Config: &withTZ, Policy: pol, Prompt: "hi"},
			env: with(base, "TZ", "Europe/Berlin"), security: true},
		{name: "resumed task", in: Input{Group: fam, Config: cfg, Policy: pol, Prompt: "hi", IsTask: true, Session: "s1"},
			env: base, security: true, session: "s1", task: true},
		{name: "standby", in: Input{Group: fam, Config: cfg, Policy: pol, Standby: true}, env: base, security: true, stand: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Token, tt.in.Binary, tt.in.Getenv = "tok", "/bin/nanoclawd", getenv
			spec, err := For(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(spec.Env, tt.env) {
				t.Errorf("env = %v\nwant %v", spec.Env, tt.env)
			}
			g := tt.in.Group
			if spec.Dir != "/g/"+g.Folder || spec.IPCDir != "/d/ipc/"+g.Folder || spec.LogDir != "/g/"+g.Folder+"/logs" ||
				spec.Timeout != time.Hour || spec.IdleTimeout != time.Minute || len(spec.Command) != 2 {
				t.Errorf("spec = %+v", spec)
			}
			in := spec.Input
			if in.Prompt != tt.in.Prompt || in.GroupFolder != g.Folder || in.ChatJID != g.JID || in.IsMain != g.IsMain ||
				in.SessionID != tt.session || in.IsScheduledTask != tt.task || in.Standby != tt.stand || in.AssistantName != "Andy" {
				t.Errorf("input = %+v", in)
			}
			if (len(in.Security) > 0) != tt.security {
				t.Errorf("security in the input = %s, want it: %v", in.Security, tt.security)
			}
			var sdk map[string]any
			if err := json.Unmarshal(in.SDKOptions, &sdk); err != nil {
				t.Fatalf("SDK options %s: %v", in.SDKOptions, err)
			}
			if tt.security && sdk["tools"] == nil {
				t.Errorf("SDK options = %s, want the policy's", in.SDKOptions)
			}
			if tt.security {
				var p map[string]any
				json.Unmarshal(in.Security, &p)
				if _, ok := p["sdkOptions"]; ok || p["group"] != "family" {
					t.Errorf("policy in the input = %s: want it without the SDK options", in.Security)
				}
			}
		})
	}
}
