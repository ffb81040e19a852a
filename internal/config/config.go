// Package config loads nanoclaw.config.jsonc: JSON with comments and
// trailing commas, decoded strictly (unknown, wrong-case and duplicate keys
// are errors with their line and column), with ${VAR} expansion, defaults,
// paths made absolute against the file's directory, and validation.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// DefaultFile is the config path used when --config is not given.
const DefaultFile = "nanoclaw.config.jsonc"

// Config is the whole file. Paths are absolute once Load returns.
type Config struct {
	// Keys tagged reload:"restart" are read only at start (reload.go).
	// assistantName is among them because the WhatsApp channel prefixes
	// replies with it and recognises its own echoes by it.
	AssistantName string   `json:"assistantName" validate:"required,max=64" reload:"restart"`
	DataDir       string   `json:"dataDir" validate:"required" reload:"restart"`
	GroupsDir     string   `json:"groupsDir" validate:"required" reload:"restart"`
	Timezone      string   `json:"timezone" validate:"omitempty,timezone" reload:"restart"`
	Channels      Channels `json:"channels" reload:"restart"`
	Agent         Agent    `json:"agent"`
	// HostSecurity is the global policy for every non-main group.
	HostSecurity security.Policy `json:"hostSecurity"`
	Alerts       Alerts          `json:"alerts" reload:"restart"`
	Backup       Backup          `json:"backup" reload:"restart"`
	// Media: the files people send in the chats.
	Media Media `json:"media"`
	// Usage prices the model requests the relay counts.
	Usage Usage `json:"usage"`
	// Providers are upstreams that speak the Messages API, by name
	// (models.go); "anthropic" is built in.
	Providers map[string]Provider `json:"providers"`
	// Console is the owner's web console and its /metrics (its address
	// and TLS apply at a restart, metricsToken at once).
	Console Console `json:"console"`
	// Retention: how long the database keeps what it records (read at
	// each daily pruning, so an edit applies from the next one).
	Retention Retention `json:"retention"`

	// File is the absolute path the config was loaded from (it need not exist).
	File string `json:"-"`
}

// Channels configures the chat networks.
type Channels struct {
	WhatsApp WhatsApp `json:"whatsapp"`
	Local    Local    `json:"local"`
	Telegram Telegram `json:"telegram"`
}

// Telegram configures the Telegram channel (a bot, long polling).
type Telegram struct {
	Enabled bool `json:"enabled" reload:"restart"`
	// Token is the bot's token from @BotFather; "" means the environment's
	// TELEGRAM_BOT_TOKEN, read when the channel starts, so that a token in
	// nanoclawd.env (loaded after the config) counts.
	Token string `json:"token" reload:"restart" secret:"true"`
	// APIURL is the Bot API server: methods at {APIURL}/bot{token}/{method}.
	APIURL string `json:"apiURL" validate:"required,http_url" reload:"restart" secret:"url"`
}

// TelegramTokenEnv is where the bot token comes from when the config
// names none.
const TelegramTokenEnv = "TELEGRAM_BOT_TOKEN"

// BotToken is the Telegram bot token in force: the config's, else
// $TELEGRAM_BOT_TOKEN.
func (t Telegram) BotToken() string {
	if t.Token != "" {
		return t.Token
	}
	return os.Getenv(TelegramTokenEnv)
}

// WhatsApp configures the WhatsApp channel.
type WhatsApp struct {
	Enabled bool `json:"enabled"`
	// OwnNumber: the assistant has a number of its own, so replies carry
	// no "Name: " prefix.
	OwnNumber bool `json:"ownNumber"`
}

// Local configures the local HTTP-over-Unix-socket channel.
type Local struct {
	Enabled bool   `json:"enabled"`
	Socket  string `json:"socket" validate:"required"`
}

// Agent configures agent processes.
type Agent struct {
	Command       []string `json:"command" validate:"min=1,dive,required"`
	MaxConcurrent int      `json:"maxConcurrent" validate:"min=1,max=64" reload:"restart"`
	Timeout       Duration `json:"timeout" validate:"gt=0"`
	IdleTimeout   Duration `json:"idleTimeout" validate:"gt=0"`
	Env           []string `json:"env" validate:"dive,required"`
	// Limits bound each confined (non-main) run.
	Limits Limits `json:"limits"`
	// RunAs is the host user and group of confined runs when the daemon
	// runs as root (otherwise they are the daemon's own user).
	RunAs RunAs `json:"runAs" reload:"restart"`
	// Warm is how many agents are kept started ahead, for the most recently
	// active groups, so a message finds one booted (make bench: the first
	// API request comes seconds sooner). Each costs the memory of an idle
	// agent (node and the SDK's CLI).
	Warm int `json:"warm" validate:"min=0,max=16"`
	// WarmFor is how long an agent started ahead waits for its first
	// prompt; IdleTimeout does not apply to it (it writes nothing while
	// it waits), so it outlasts a group's quiet hours.
	WarmFor Duration `json:"warmFor" validate:"gt=0"`
	// MaxPromptMessages caps one prompt at the newest this many messages.
	MaxPromptMessages int `json:"maxPromptMessages" validate:"min=1,max=10000"`
	// NewSessionCommand, a whole message in any registered chat, makes
	// the group's next run start a fresh session ("" turns it off).
	NewSessionCommand string `json:"newSessionCommand" validate:"max=32"`
	// Budget limits what each non-main group's model requests cost (USD);
	// a group's override may set its own.
	Budget security.Budget `json:"budget"`
	// Model is every group's model ("" = the SDK's default); a group's
	// override may name its own.
	Model string `json:"model"`
	// Provider is where the model requests go: "anthropic" or a name
	// from providers.
	Provider string `json:"provider" validate:"required"`
	// Fallback is tried in order when the chosen upstream fails before
	// its answer began.
	Fallback []Fallback `json:"fallback"`
	// APITimeout: no response headers, or a stream silent this long, is a
	// failure of that upstream.
	APITimeout Duration `json:"apiTimeout" validate:"gt=0"`
}

// Media configures the files received in chats (voice notes, photos,
// documents, videos, stickers), saved under each group's media/.
type Media struct {
	// MaxBytes: a larger file is not downloaded; the prompt says so.
	MaxBytes int `json:"maxBytes" validate:"min=1"`
	// Transcribe turns voice notes and audio into text for the prompt.
	Transcribe Transcribe `json:"transcribe"`
}

// Transcribe says how audio becomes text: a local program (Command,
// argv with "{file}" for the audio's path, its stdout the text) or else an
// OpenAI-compatible /v1/audio/transcriptions endpoint (URL, with APIKey
// and Model). Neither set: voice notes reach the agent untranscribed.
type Transcribe struct {
	Command []string `json:"command" validate:"omitempty,dive,required"`
	URL     string   `json:"url" validate:"omitempty,http_url" secret:"url"`
	APIKey  string   `json:"apiKey" secret:"true"`
	Model   string   `json:"model" validate:"required"`
	Timeout Duration `json:"timeout" validate:"gt=0"`
}

// Limits bound one confined run; sizes in MiB.
type Limits struct {
	Processes   int `json:"processes" validate:"min=16"`
	FileSizeMiB int `json:"fileSizeMiB" validate:"min=1"`
	TmpMiB      int `json:"tmpMiB" validate:"min=1"`
	ShmMiB      int `json:"shmMiB" validate:"min=1"`
	MemoryMiB   int `json:"memoryMiB" validate:"min=64"`
	DiskMiB     int `json:"diskMiB" validate:"min=1"`
}

// RunAs is a host uid and gid, never root's.
type RunAs struct {
	UID int `json:"uid" validate:"min=1,max=2147483646"`
	GID int `json:"gid" validate:"min=1,max=2147483646"`
}

// User is the host user confined runs are, as the sandbox starts them.
func (r RunAs) User() sandbox.User { return sandbox.RunUser(sandbox.User{UID: r.UID, GID: r.GID}) }

// Alerts configures sandbox alerts to the main group.
type Alerts struct {
	Cooldown Duration `json:"cooldown" validate:"gte=0"`
	// MaxPerGroup is how many alerts one group may raise per cooldown;
	// the rest are folded into one summary.
	MaxPerGroup int `json:"maxPerGroup" validate:"min=1,max=100"`
	// Fallback is a command (argv, no shell) run with an alert's text on
	// stdin when the main chat cannot be reached: WhatsApp logged out, or
	// down for longer than Cooldown. Unset: alerts only wait.
	Fallback []string `json:"fallback" validate:"omitempty,dive,required"`
	// Daily is the local time ("HH:MM") of a short summary to the main
	// chat; "" sends none.
	Daily string `json:"daily" validate:"omitempty,hhmm"`
	// Approvers are the phone numbers (and Telegram users as tg:<user id>)
	// that may answer alerts from the main chat (/allow, /undo, /pause,
	// /resume, /groups); empty: the paired account itself (on Telegram the
	// user who sent the setup code, or the user of a private main chat).
	// Any sender of a local: main chat may.
	Approvers []string `json:"approvers" validate:"dive,required"`
}

// Backup schedules `nanoclawd backup` inside the daemon.
type Backup struct {
	// Dir is where archives go; "" (with Every 0) means no scheduled backups.
	Dir string `json:"dir"`
	// Every is the time between two scheduled backups; 0 = none.
	Every Duration `json:"every" validate:"gte=0"`
	// Keep is how many of the newest archives in Dir are kept.
	Keep int `json:"keep" validate:"min=1,max=1000"`
}

// Retention is how long each kind of record is kept; 0 keeps it for ever.
// Older rows are pruned at start and daily.
type Retention struct {
	// Messages: the chats' messages and the assistant's answers (what
	// search_history finds); unset keeps them.
	Messages Duration `json:"messages" validate:"gte=0"`
	// Usage: the per-request usage ledger.
	Usage Duration `json:"usage" validate:"gte=0"`
	// Audit: the violations (blocked actions) recorded for alerts.
	Audit Duration `json:"audit" validate:"gte=0"`
	// Runs: scheduled tasks' run logs and the hourly run counts.
	Runs Duration `json:"runs" validate:"gte=0"`
}

// Day is the unit "d" of a Duration.
const Day = 24 * time.Hour

// DailyAt parses alerts.daily: the hour and minute, ok false when unset.
func (a Alerts) DailyAt() (hour, minute int, ok bool) {
	t, err := time.Parse("15:04", a.Daily)
	if err != nil {
		return 0, 0, false
	}
	return t.Hour(), t.Minute(), true
}

// Duration is a time.Duration written as "30m" in JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a duration string; whole days as "400d".
func (d Duration) MarshalJSON() ([]byte, error) {
	if v := time.Duration(d); v > 0 && v%Day == 0 {
		return json.Marshal(strconv.FormatInt(int64(v/Day), 10) + "d")
	}
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "90s", "30m" or, for
// retention, "400d" (days of 24 hours).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string like \"30m\"")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*366 {
			return fmt.Errorf("%q is not a number of days; write it like \"90d\"", s)
		}
		*d = Duration(time.Duration(n) * Day)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write it like \"90s\", \"30m\", \"1h\" or \"90d\"", s)
	}
	*d = Duration(v)
	return nil
}

// DefaultTools is every Claude Code tool a non-main group gets by default.
var DefaultTools = []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep", "WebSearch", "WebFetch"}

// DefaultDenyRead is the default hostSecurity.denyRead.
// Beyond the contract's list, it holds what an attack on a confined group
// found readable once allowRead opens part of the home: the CLI's own
// credentials and transcripts, shell histories and tool credentials.
var DefaultDenyRead = []string{"~/.ssh", "~/.aws", "~/.gnupg", "~/.config", "~/Library",
	"~/.claude", "~/.claude.json", "~/.bash_history", "~/.zsh_history", "~/.python_history", "~/.node_repl_history",
	"~/.psql_history", "~/.mysql_history", "~/.lesshst", "~/.netrc", "~/.git-credentials", "~/.gitconfig",
	"~/.docker", "~/.kube", "~/.npmrc", "~/.pypirc", "~/.cargo/credentials.toml", "~/.terraform.d",
	"~/.password-store", "~/Keychains",
	"**/.env", "**/*.pem", "**/*.key"}

// Default returns the configuration used for a key the file leaves out.
func Default() Config {
	sandboxOn := true
	return Config{
		AssistantName: "Andy",
		DataDir:       layout.DefaultDataDir,
		GroupsDir:     layout.DefaultGroupsDir,
		Channels: Channels{
			WhatsApp: WhatsApp{Enabled: true},
			Local:    Local{Socket: layout.DefaultLocalSocket},
			Telegram: Telegram{APIURL: "https://api.telegram.org"},
		},
		Agent: Agent{
			Command:           []string{"node", "agent-runner/dist/index.js"},
			MaxConcurrent:     5,
			Limits:            Limits{Processes: 512, FileSizeMiB: 1024, TmpMiB: 512, ShmMiB: 64, MemoryMiB: 4096, DiskMiB: 2048},
			RunAs:             RunAs{UID: sandbox.DefaultRunID, GID: sandbox.DefaultRunID},
			NewSessionCommand: "/new",
			MaxPromptMessages: 50,
			Warm:              1,
			WarmFor:           Duration(12 * time.Hour),
			Timeout:           Duration(30 * time.Minute),
			IdleTimeout:       Duration(30 * time.Minute),
			Env:               []string{},
			Provider:          "anthropic",
			Fallback:          []Fallback{},
			APITimeout:        Duration(60 * time.Second),
		},
		HostSecurity: security.Policy{
			Sandbox:        &sandboxOn,
			Tools:          append([]string(nil), DefaultTools...),
			PermissionMode: "default",
			DenyRead:       append([]string(nil), DefaultDenyRead...),
			AllowRead:      []string{},
			AllowWrite:     []string{},
			Network:        &security.Network{AllowedDomains: []string{}, DeniedDomains: []string{}},
		},
		Alerts:    Alerts{Cooldown: Duration(time.Minute), MaxPerGroup: 3, Approvers: []string{}},
		Backup:    Backup{Keep: 7},
		Media:     Media{MaxBytes: 20 << 20, Transcribe: Transcribe{Model: "whisper-1", Timeout: Duration(5 * time.Minute)}},
		Usage:     Usage{Prices: usage.DefaultPrices()},
		Providers: map[string]Provider{},
		Console:   Console{Enabled: true, Listen: DefaultConsoleListen},
		// Messages are kept: they are what the assistant can recall.
		Retention: Retention{Usage: Duration(400 * Day), Audit: Duration(400 * Day), Runs: Duration(90 * Day)},
	}
}

// SandboxLimits is l in the sandbox's units.
func (l Limits) SandboxLimits() sandbox.Limits {
	return sandbox.Limits{Processes: l.Processes, FileSize: int64(l.FileSizeMiB) << 20, TmpSize: int64(l.TmpMiB) << 20, ShmSize: int64(l.ShmMiB) << 20,
		Memory: int64(l.MemoryMiB) << 20, Disk: int64(l.DiskMiB) << 20}
}

// DefaultTrigger is the trigger a group gets when none is given.
func (c *Config) DefaultTrigger() string { return "@" + c.AssistantName }

// locations are the time zones read so far, by name: timezone applies
// only after a restart, so each is read from the zone database once, not
// at every answer the relay meters or every status.
var locations sync.Map

// Location returns the configured time zone, or the system's.
func (c *Config) Location() *time.Location {
	if c.Timezone == "" {
		return time.Local
	}
	if loc, ok := locations.Load(c.Timezone); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return time.Local
	}
	locations.Store(c.Timezone, loc)
	return loc
}

// Layout names the files of this installation's data and groups dirs.
func (c *Config) Layout() layout.Layout { return layout.New(c.DataDir, c.GroupsDir) }

// SecurityHost describes this installation to policy resolution.
func (c *Config) SecurityHost(folders []string) security.Host {
	home, _ := os.UserHomeDir()
	return security.Host{
		Home:       home,
		ConfigFile: c.File,
		ConfigDir:  filepath.Dir(c.File),
		Layout:     c.Layout(),
		Socket:     c.Channels.Local.Socket,
		Folders:    folders,
		AgentEnv:   c.Agent.Env,
		Model:      c.Agent.Model,
		Provider:   c.Agent.Provider,
	}
}
