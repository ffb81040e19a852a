package security

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// NanoclawTools is the permission pattern of the nanoclaw MCP tools, which
// every group keeps whatever its policy says.
const NanoclawTools = "mcp__nanoclaw__*"

// AllTools is every Claude Code built-in tool the main group gets.
var AllTools = []string{"Bash", "Read", "Write", "Edit", "MultiEdit", "Glob", "Grep", "LS", "NotebookEdit", "WebSearch", "WebFetch", "Task", "TodoWrite"}

// Group is what resolution needs to know about the group an agent runs for.
type Group struct {
	Folder   string
	IsMain   bool
	Override *Policy // nil: none
}

// Host is what resolution needs to know about this installation. Paths
// are absolute.
type Host struct {
	Home       string        // the daemon user's home, for "~"
	ConfigFile string        // nanoclaw.config.jsonc
	ConfigDir  string        // relative override paths resolve against it
	Layout     layout.Layout // the data dir's and groups dir's files
	Socket     string        // the local channel's socket
	Folders    []string      // every registered group's folder
	AgentEnv   []string      // names of the daemon variables handed to agents
	Model      string        // agent.model ("" = the SDK's default)
	Provider   string        // agent.provider
}

// Effective is a group's resolved policy, as `security show --json` prints it.
type Effective struct {
	Group          string    `json:"group"`
	IsMain         bool      `json:"isMain"`
	Sandbox        bool      `json:"sandbox"`
	Tools          []string  `json:"tools"`
	PermissionMode string    `json:"permissionMode"`
	SettingSources []string  `json:"settingSources"`
	DenyRead       []string  `json:"denyRead"`
	DenyWrite      []string  `json:"denyWrite"`
	AllowRead      []string  `json:"allowRead"`
	AllowWrite     []string  `json:"allowWrite"`
	Network        Network   `json:"network"`
	SecretEnv      []string  `json:"secretEnv"`
	Env            EnvPolicy `json:"env"`
	// Model ("" = the SDK's default) and Provider are where the group's
	// model requests go (the override's, else agent.model/agent.provider).
	Model      string         `json:"model"`
	Provider   string         `json:"provider"`
	SDKOptions map[string]any `json:"sdkOptions,omitempty"`
}

// EnvPolicy is what of agent.env enters the group's runs, and what is
// held back from a confined one, each with the reason.
type EnvPolicy struct {
	Enter    []EnvVar `json:"enter"`
	HeldBack []EnvVar `json:"heldBack"`
}

// EnvVar is one name of agent.env and why it enters or is held back.
type EnvVar struct {
	Name string `json:"name"`
	Why  string `json:"why"`
}

// Passes tells whether the variable name of agent.env enters the group's runs.
func (e Effective) Passes(name string) bool {
	return slices.ContainsFunc(e.Env.Enter, func(v EnvVar) bool { return v.Name == name })
}

// Resolve merges the global policy with a group's override (docs/configuration.md, "Per-group overrides")
// and translates the result into the Claude Agent SDK options.
func Resolve(global Policy, g Group, h Host) Effective {
	groupDir := h.Layout.Group(g.Folder)
	if g.IsMain {
		// The owner's own channel is trusted: no sandbox, no prompts,
		// every tool, and the operator's user settings.
		e := Effective{
			Group: g.Folder, IsMain: true, Tools: slices.Clone(AllTools),
			PermissionMode: "bypassPermissions", SettingSources: []string{"user", "project"},
			DenyRead: []string{}, DenyWrite: []string{}, AllowRead: []string{}, AllowWrite: []string{}, SecretEnv: []string{},
			Network: Network{AllowedDomains: []string{}, DeniedDomains: []string{}},
			Env:     envPolicy(h.AgentEnv, nil, true),
		}
		e.SDKOptions = map[string]any{
			"cwd":                             groupDir,
			"permissionMode":                  "bypassPermissions",
			"allowDangerouslySkipPermissions": true,
			"settingSources":                  e.SettingSources,
			"sandbox":                         map[string]any{"enabled": false},
		}
		e.withModel(g.Override, h)
		return e
	}

	o := g.Override
	if o == nil {
		o = &Policy{}
	}
	e := Effective{Group: g.Folder, SettingSources: []string{"project"}}
	e.Sandbox = pick(o.Sandbox, global.Sandbox, true)
	e.PermissionMode = first(o.PermissionMode, global.PermissionMode, "default")
	if e.PermissionMode == "bypassPermissions" { // never for a non-main group
		e.PermissionMode = "default"
	}
	e.Tools = slices.Clone(global.Tools)
	if o.Tools != nil {
		e.Tools = slices.Clone(o.Tools)
	}
	e.Network.AllowedDomains = nonNil(netList(o.Network, global.Network, func(n *Network) []string { return n.AllowedDomains }))
	e.Network.DeniedDomains = nonNil(netList(o.Network, global.Network, func(n *Network) []string { return n.DeniedDomains }))

	abs := func(list []string) []string {
		out := make([]string, 0, len(list))
		for _, p := range list {
			out = append(out, absPath(h, p))
		}
		return out
	}
	// What no non-main agent may touch: the operator's denylist, the
	// daemon's own state (layout.StateFiles: its own IPC directory is
	// reached only through the MCP tools) and config, and every other
	// group's folder and session.
	deny := abs(global.DenyRead)
	deny = append(deny, abs(o.DenyRead)...)
	deny = append(deny, h.ConfigFile, filepath.Join(h.ConfigDir, layout.EnvFile), h.Socket)
	deny = append(deny, h.Layout.StateFiles()...)
	for _, f := range h.Folders {
		if f != g.Folder {
			deny = append(deny, h.Layout.Group(f), h.Layout.Session(f))
		}
	}
	e.DenyRead = dedupe(deny)
	// Inside its own folder an agent may not rewrite its audit trail, its
	// project settings or its project MCP servers: those would loosen its
	// own sandbox on the next run.
	e.DenyWrite = []string{h.Layout.GroupLogs(g.Folder), filepath.Join(groupDir, ".claude"), filepath.Join(groupDir, ".mcp.json")}
	// The shared memory every group reads (written only from the main group).
	e.AllowRead = dedupe(append(append(abs(global.AllowRead), abs(o.AllowRead)...), h.Layout.Global()))
	e.AllowWrite = dedupe(append(append(abs(global.AllowWrite), abs(o.AllowWrite)...), groupDir))
	e.SecretEnv = secretEnv(h.AgentEnv)
	e.Env = envPolicy(h.AgentEnv, o.Env, false)
	e.SDKOptions = sdkOptions(e, groupDir)
	e.withModel(g.Override, h)
	return e
}

// withModel sets the group's model and provider (the override's, else
// the config's) and hands the model to the SDK; the relay rewrites it to
// the provider's name for it.
func (e *Effective) withModel(o *Policy, h Host) {
	if o == nil {
		o = &Policy{}
	}
	e.Model = first(o.Model, h.Model)
	e.Provider = first(o.Provider, h.Provider, "anthropic")
	if e.Model != "" {
		e.SDKOptions["model"] = e.Model
	}
}

func sdkOptions(e Effective, groupDir string) map[string]any {
	tools := append(slices.Clone(e.Tools), NanoclawTools)
	// allowedTools pre-approves: with nobody to ask, whatever is not
	// listed is refused. Write and Edit are approved only inside the
	// writable paths, because a bare Write approves writes anywhere.
	var allowed []string
	for _, t := range e.Tools {
		switch t {
		case "Write", "Edit", "MultiEdit", "NotebookEdit":
			for _, p := range e.AllowWrite {
				allowed = append(allowed, t+"("+rulePath(p)+"/**)")
			}
		case "Bash":
			// Unsandboxed commands are never allowed: without the sandbox,
			// Bash is not pre-approved and so is refused.
			if e.Sandbox {
				allowed = append(allowed, t)
			}
		default:
			allowed = append(allowed, t)
		}
	}
	allowed = append(allowed, NanoclawTools)

	// The sandbox covers Bash only; Read/Edit deny rules bound the file
	// tools, and in Bash make the paths empty (Read) or read-only (Edit).
	var deny []string
	for _, p := range e.DenyRead {
		deny = append(deny, denyRules("Read", p)...)
		deny = append(deny, denyRules("Edit", p)...)
	}
	for _, p := range e.DenyWrite {
		deny = append(deny, denyRules("Edit", p)...)
	}
	// Every run of a non-main group runs inside the daemon's OS sandbox
	// (internal/sandbox), which is the boundary for Bash too. The SDK's own
	// Bash sandbox cannot run inside it (bubblewrap cannot mount /proc in a
	// bubblewrap sandbox; Seatbelt profiles do not nest), so it is off.
	creds := make([]any, 0, len(e.SecretEnv))
	for _, name := range e.SecretEnv {
		creds = append(creds, map[string]any{"name": name, "mode": "deny"})
	}
	return map[string]any{
		"cwd":            groupDir,
		"tools":          tools,
		"allowedTools":   allowed,
		"permissionMode": e.PermissionMode,
		"settingSources": e.SettingSources,
		"sandbox": map[string]any{
			"enabled":                  false,
			"autoAllowBashIfSandboxed": true,
			"allowUnsandboxedCommands": false,
			"filesystem": map[string]any{
				"denyRead":   e.DenyRead,
				"allowWrite": e.AllowWrite,
				"denyWrite":  e.DenyWrite,
			},
			"network": map[string]any{
				"allowedDomains": e.Network.AllowedDomains,
				"deniedDomains":  e.Network.DeniedDomains,
			},
			"credentials": map[string]any{"envVars": creds},
		},
		"settings": map[string]any{
			"permissions": map[string]any{"deny": deny},
			// WebFetch would first ask api.anthropic.com whether a domain is
			// safe, a host no group may reach; the gateway's domain lists
			// decide instead.
			"skipWebFetchPreflight": true,
		},
	}
}

// rulePath writes an absolute path as a permission-rule path ("//abs").
func rulePath(p string) string {
	if strings.HasPrefix(p, "/") {
		return "/" + p
	}
	return p
}

// denyRules covers p itself and, were it a directory, all below it. A glob
// such as "**/.env" is a rule as it is.
func denyRules(tool, p string) []string {
	if strings.ContainsAny(p, "*?[") {
		return []string{tool + "(" + rulePath(p) + ")"}
	}
	return []string{tool + "(" + rulePath(p) + ")", tool + "(" + rulePath(p) + "/**)"}
}

func absPath(h Host, p string) string {
	switch {
	case p == "~":
		return h.Home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(h.Home, p[2:])
	case filepath.IsAbs(p), strings.HasPrefix(p, "**/"):
		return p
	default:
		return filepath.Join(h.ConfigDir, p)
	}
}

// ModelCredentials are the variables that carry a model-API credential:
// a confined run holds a per-run placeholder in their place, which only
// its gateway's relay turns into the real one.
var ModelCredentials = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"}

// CredentialSet reports whether agents get a model credential: one of
// the credential variables is set in the daemon's environment and named
// in agent.env.
func CredentialSet(agentEnv []string, getenv func(string) string) bool {
	name, _ := CredentialInUse(agentEnv, getenv)
	return name != ""
}

// CredentialInUse is the credential agents get: the first credential
// variable set in the daemon's environment and named in agent.env, and
// its value ("", "" if none).
func CredentialInUse(agentEnv []string, getenv func(string) string) (name, value string) {
	for _, n := range ModelCredentials {
		if v := getenv(n); v != "" && slices.Contains(agentEnv, n) {
			return n, v
		}
	}
	return "", ""
}

// Fingerprint names a secret without telling it: the start of its
// SHA-256, to compare two copies (the running daemon's, a file's).
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:4])
}

// alwaysSecret are held by every agent process and never given to the
// commands it runs.
var alwaysSecret = append(slices.Clone(ModelCredentials), "NANOCLAW_IPC_TOKEN")

var secretWords = []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "PRIVATE"}

// LooksSecret returns the word that makes a variable's name look like a
// secret, or "".
func LooksSecret(name string) string {
	upper := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return w
		}
	}
	return ""
}

func secretEnv(agentEnv []string) []string {
	out := slices.Clone(alwaysSecret)
	for _, name := range agentEnv {
		if LooksSecret(name) != "" {
			out = append(out, name)
		}
	}
	return dedupe(out)
}

// envPolicy sorts agent.env for one group: the main group gets it all; a
// confined run gets the model credentials as placeholders, and a name
// that looks like a secret only when the group's override lists it.
func envPolicy(agentEnv, allowed []string, isMain bool) EnvPolicy {
	e := EnvPolicy{Enter: []EnvVar{}, HeldBack: []EnvVar{}}
	for _, name := range dedupe(agentEnv) {
		word := LooksSecret(name)
		switch {
		case isMain:
			e.Enter = append(e.Enter, EnvVar{name, "the main group is not confined"})
		case slices.Contains(ModelCredentials, name):
			e.Enter = append(e.Enter, EnvVar{name, "as a placeholder of each run; the relay holds the real credential"})
		case word == "":
			e.Enter = append(e.Enter, EnvVar{name, "does not look like a secret"})
		case slices.Contains(allowed, name):
			e.Enter = append(e.Enter, EnvVar{name, "looks like a secret (" + word + "), listed in the group's override \"env\""})
		default:
			e.HeldBack = append(e.HeldBack, EnvVar{name, "looks like a secret (" + word + "); list it in the group's override \"env\" to let it in"})
		}
	}
	return e
}

func pick(o, g *bool, def bool) bool {
	if o != nil {
		return *o
	}
	if g != nil {
		return *g
	}
	return def
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func netList(o, g *Network, get func(*Network) []string) []string {
	if o != nil && get(o) != nil {
		return slices.Clone(get(o))
	}
	if g != nil {
		return slices.Clone(get(g))
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// RuleFor names the policy key behind a violation an agent reported under
// the policy e, for the owner's fix hint: a tool the group was not given
// is the tool list; a write the group may not make is allowWrite; any
// other refusal of a granted tool is a deny rule.
func RuleFor(e Effective, kind Kind, tool string) string {
	switch kind {
	case KindNetwork:
		return "hostSecurity.network.allowedDomains"
	case KindTool:
		return "hostSecurity.tools"
	case KindFilesystem, KindPermission:
		if !strings.HasPrefix(tool, "mcp__") && !slices.Contains(e.Tools, tool) {
			return "hostSecurity.tools"
		}
		switch tool {
		case "Write", "Edit", "MultiEdit", "NotebookEdit":
			return "hostSecurity.allowWrite"
		}
		return "hostSecurity.denyRead"
	}
	return ""
}
