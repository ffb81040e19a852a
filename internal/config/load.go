package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-playground/validator/v10"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Load reads the env file beside the config at path (LoadEnv: a ${VAR}
// may come from it), then the config. A missing file means all defaults.
// The returned error is Errors (one FILE:LINE:COL line per problem) for
// problems in the file, or a plain error when it cannot be read.
func Load(path string) (*Config, error) {
	if _, err := LoadEnv(path); err != nil {
		return nil, err
	}
	return read(path)
}

// read reads the config at path, as Load does, without the env file.
func read(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("config path %s: %w", path, err)
	}
	cfg := Default()
	cfg.File = abs
	src, err := os.ReadFile(abs)
	if errors.Is(err, fs.ErrNotExist) {
		cfg.resolvePaths()
		return &cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(abs, src)
}

// Parse decodes src as the config file at the absolute path file.
func Parse(file string, src []byte) (*Config, error) {
	cfg := Default()
	cfg.File = file
	pos, err := DecodeStrict(file, src, &cfg, true)
	var errs Errors
	if err != nil {
		if !errors.As(err, &errs) || pos == nil {
			return nil, err // a syntax error: nothing decoded to validate
		}
	}
	report := func(key, format string, args ...any) {
		line, col := 1, 1
		if off, ok := pos[key]; ok {
			line, col = LineCol(src, off)
		}
		errs = append(errs, &Error{File: file, Line: line, Col: col, Key: key, Msg: fmt.Sprintf(format, args...)})
	}
	problems := ValidatePolicy(&cfg.HostSecurity, "hostSecurity")
	problems = append(problems, budgetProblems(cfg.Agent.Budget, "agent.budget")...)
	problems = append(problems, modelProblems(&cfg)...)
	problems = append(problems, consoleProblems(cfg.Console)...)
	for _, e := range append(problems, usageProblems(cfg.Usage)...) {
		report(e.Key, "%s", e.Msg)
	}
	if tok := cfg.Channels.Telegram.Token; tok != "" {
		if err := CheckTelegramToken(tok); err != nil {
			report("channels.telegram.token", "channels.telegram.token %v", err)
		}
	}
	if cfg.Backup.Every > 0 && cfg.Backup.Dir == "" {
		report("backup.every", "backup.every is set but backup.dir is not: name the directory the archives go to, or remove backup.every")
	}
	if cfg.Backup.Every > 0 && cfg.Backup.Every.D() < time.Minute {
		report("backup.every", "backup.every is %s, below the minimum 1m", cfg.Backup.Every.D())
	}
	if cmd := cfg.Media.Transcribe.Command; len(cmd) > 0 && !slices.ContainsFunc(cmd, func(a string) bool { return strings.Contains(a, "{file}") }) {
		report("media.transcribe.command", "media.transcribe.command never names {file}, so the program would not know which audio to read: "+
			"put {file} where the audio's path goes, e.g. [\"whisper-cli\", \"-m\", \"MODEL\", \"-nt\", \"-f\", \"{file}\"]")
	}
	if err := validate.Struct(&cfg); err != nil {
		var verrs validator.ValidationErrors
		if !errors.As(err, &verrs) {
			return nil, err
		}
		for _, fe := range verrs {
			key := keyPath(fe.Namespace())
			if strings.HasPrefix(key, "hostSecurity.") {
				continue // reported by ValidatePolicy
			}
			report(key, "%s", describe(key, fe))
		}
	}
	if len(errs) > 0 {
		return nil, errs.Sorted()
	}
	cfg.resolvePaths()
	return &cfg, nil
}

// PolicyProblem is one invalid entry of a security policy.
type PolicyProblem struct{ Key, Msg string }

var toolRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*(\(.*\))?$`)

// ValidatePolicy checks a global policy or a group override; prefix is the
// key path the policy sits at ("hostSecurity" or "" for an override).
func ValidatePolicy(p *security.Policy, prefix string) []PolicyProblem {
	var out []PolicyProblem
	key := func(k string) string {
		if prefix == "" {
			return k
		}
		return prefix + "." + k
	}
	if p.Tools != nil && len(p.Tools) == 0 {
		out = append(out, PolicyProblem{key("tools"), fmt.Sprintf("%s is empty, which would leave the agent no tools: remove the key to allow every tool, or list at least one (e.g. \"Read\")", key("tools"))})
	}
	for i, t := range p.Tools {
		if !toolRE.MatchString(t) {
			k := fmt.Sprintf("%s[%d]", key("tools"), i)
			out = append(out, PolicyProblem{k, fmt.Sprintf("%s: %q is not a tool name; write a name such as \"Bash\" or \"WebFetch\"", k, t)})
		}
	}
	switch p.PermissionMode {
	case "", "default", "acceptEdits", "dontAsk":
	case "bypassPermissions":
		out = append(out, PolicyProblem{key("permissionMode"), fmt.Sprintf("%s: \"bypassPermissions\" is only for the main group; use \"default\", \"acceptEdits\" or \"dontAsk\"", key("permissionMode"))})
	default:
		out = append(out, PolicyProblem{key("permissionMode"), fmt.Sprintf("%s: %q is not a permission mode; use \"default\", \"acceptEdits\" or \"dontAsk\"", key("permissionMode"), p.PermissionMode)})
	}
	if prefix != "" && p.Senders != nil {
		out = append(out, PolicyProblem{key("senders"), fmt.Sprintf("%s: who may call the assistant is set per group: remove it here and run `nanoclawd groups set-security FOLDER --file OVERRIDE.json` with {\"senders\": [...]}", key("senders"))})
	}
	out = append(out, validateBudget(p.Budget, prefix)...)
	if prefix != "" && (p.Model != "" || p.Provider != "") {
		out = append(out, PolicyProblem{key("model"), fmt.Sprintf("%s: every group's model is agent.model (and agent.provider); one group's goes in its override, e.g. with `nanoclawd groups set-model FOLDER MODEL`", key("model"))})
	}
	if prefix != "" && p.Env != nil {
		out = append(out, PolicyProblem{key("env"), fmt.Sprintf("%s: which secrets of agent.env may enter confined runs is set per group: remove it here and run `nanoclawd groups set-security FOLDER --file OVERRIDE.json` with {\"env\": [...]}", key("env"))})
	}
	lists := map[string][]string{"denyRead": p.DenyRead, "allowRead": p.AllowRead, "allowWrite": p.AllowWrite, "senders": p.Senders, "env": p.Env}
	if p.Network != nil {
		lists["network.allowedDomains"] = p.Network.AllowedDomains
		lists["network.deniedDomains"] = p.Network.DeniedDomains
	}
	for name, list := range lists {
		for i, s := range list {
			k := fmt.Sprintf("%s[%d]", key(name), i)
			if strings.TrimSpace(s) == "" {
				out = append(out, PolicyProblem{k, fmt.Sprintf("%s is empty: remove the entry or write a path or domain", k)})
			} else if strings.HasPrefix(name, "network.") {
				if err := gateway.CheckRule(s); err != nil {
					out = append(out, PolicyProblem{k, fmt.Sprintf("%s: %v", k, err)})
				}
			}
		}
	}
	return out
}

// ValidateOverrideEnv checks a group override's env list against agent.env
// of the config at configFile: a name not passed to agents at all would
// silently do nothing.
func ValidateOverrideEnv(p *security.Policy, agentEnv []string, configFile string) []PolicyProblem {
	var out []PolicyProblem
	for i, name := range p.Env {
		if name != "" && !slices.Contains(agentEnv, name) {
			k := fmt.Sprintf("env[%d]", i)
			out = append(out, PolicyProblem{k, fmt.Sprintf("%s: %q is not in agent.env of %s; add it there first (env only lets a listed variable into this group's confined runs)", k, name, configFile)})
		}
	}
	return out
}

var validate = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string { return jsonName(f) })
	v.RegisterValidation("hhmm", func(fl validator.FieldLevel) bool {
		_, err := time.Parse("15:04", fl.Field().String())
		return err == nil
	})
	return v
}()

// keyPath turns validator's "Config.agent.maxConcurrent" into
// "agent.maxConcurrent".
func keyPath(ns string) string {
	_, rest, _ := strings.Cut(ns, ".")
	return rest
}

func describe(key string, fe validator.FieldError) string {
	switch fe.Tag() {
	case "required":
		return fmt.Sprintf("%s is required: give it a value or remove the key for the default", key)
	case "min", "gte", "gt":
		if fe.Kind() == reflect.Slice {
			return fmt.Sprintf("%s needs at least %s entries", key, fe.Param())
		}
		return fmt.Sprintf("%s is %v, below the minimum %s", key, fe.Value(), orZero(fe.Param()))
	case "max", "lte":
		if fe.Kind() == reflect.String {
			return fmt.Sprintf("%s is longer than %s characters", key, fe.Param())
		}
		return fmt.Sprintf("%s is %v, above the maximum %s", key, fe.Value(), fe.Param())
	case "hhmm":
		return fmt.Sprintf("%s: %q is not a time of day; write it as \"HH:MM\" in 24-hour local time, e.g. \"08:30\"", key, fe.Value())
	case "http_url":
		example := "https://api.openai.com/v1/audio/transcriptions"
		if strings.HasPrefix(key, "channels.telegram.") {
			example = "https://api.telegram.org"
		}
		return fmt.Sprintf("%s: %q is not an http(s) URL; write the endpoint in full, e.g. %q", key, fe.Value(), example)
	case "timezone":
		return fmt.Sprintf("%s: %q is not an IANA time zone; write one like \"Europe/Berlin\", or \"\" for the system's", key, fe.Value())
	}
	return fmt.Sprintf("%s fails the %q check", key, fe.Tag())
}

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// resolvePaths makes every path absolute against the config file's
// directory.
func (c *Config) resolvePaths() {
	base := filepath.Dir(c.File)
	abs := func(p string) string {
		p = ExpandHome(p)
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(base, p)
	}
	c.DataDir = abs(c.DataDir)
	c.GroupsDir = abs(c.GroupsDir)
	c.Channels.Local.Socket = abs(c.Channels.Local.Socket)
	if c.Backup.Dir != "" {
		c.Backup.Dir = abs(c.Backup.Dir)
	}
	if c.Console.TLS.Cert != "" {
		c.Console.TLS.Cert, c.Console.TLS.Key = abs(c.Console.TLS.Cert), abs(c.Console.TLS.Key)
	}
	// A bare "node" is the Node `make build` leaves beside the nanoclawd
	// binary (bin/node: a supported LTS, the machine's own when new
	// enough), else the one on PATH.
	if len(c.Agent.Command) > 0 && c.Agent.Command[0] == "node" {
		c.Agent.Command[0] = NodeBeside()
	}
	// A relative program or script path in agent.command means a file next
	// to the config: the agent runs with its group folder as cwd.
	for i, a := range c.Agent.Command {
		if strings.Contains(a, "/") && !strings.HasPrefix(a, "-") && !filepath.IsAbs(a) && !strings.HasPrefix(a, "~") {
			c.Agent.Command[i] = filepath.Join(base, a)
		}
	}
	for _, list := range [][]string{c.HostSecurity.DenyRead, c.HostSecurity.AllowWrite} {
		for i, p := range list {
			list[i] = ResolvePolicyPath(base, p)
		}
	}
}

// NodeBeside is the node beside this nanoclawd binary (bin/node after
// make build), or "node" (found on PATH) when there is none.
func NodeBeside() string {
	exe, err := os.Executable()
	if err != nil {
		return "node"
	}
	p := filepath.Join(filepath.Dir(exe), "node")
	if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "node"
	}
	return p
}

// ResolvePolicyPath makes a denyRead/allowWrite entry absolute: "~" is the
// user's home, a glob that starts with "**/" matches anywhere and stays as
// it is, and any other relative entry is relative to base.
func ResolvePolicyPath(base, p string) string {
	p = ExpandHome(p)
	if filepath.IsAbs(p) || strings.HasPrefix(p, "**/") {
		return p
	}
	return filepath.Join(base, p)
}

// ExpandHome replaces a leading "~" with the user's home directory.
func ExpandHome(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return filepath.Join(home, strings.TrimPrefix(p, "~"))
}
