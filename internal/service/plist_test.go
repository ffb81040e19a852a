package service

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"howett.net/plist"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// readPlist reads a launchd plist with a real property-list decoder, as
// launchd would: an XML plist whose top is a dictionary.
func readPlist(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var top any
	format, err := plist.Unmarshal(data, &top)
	if err != nil {
		t.Fatalf("not a property list: %v\n%s", err, data)
	}
	if format != plist.XMLFormat {
		t.Errorf("format %s, want XML", plist.FormatNames[format])
	}
	d, ok := top.(map[string]any)
	if !ok {
		t.Fatalf("the top is %T, not a dictionary", top)
	}
	return d
}

// checkPlist holds one plist, as read back, to its Spec: every key
// launchd needs, each of the type launchd reads it as, and nothing else.
func checkPlist(t *testing.T, d map[string]any, s Spec) {
	t.Helper()
	want := []string{"Label", "ProgramArguments", "WorkingDirectory", "RunAtLoad", "KeepAlive", "ThrottleInterval",
		"EnvironmentVariables", "StandardOutPath", "StandardErrorPath"}
	label := Label
	if s.User != "" {
		want, label = append(want, "UserName"), SystemLabel
	}
	for _, k := range want {
		if _, ok := d[k]; !ok {
			t.Errorf("no %s", k)
		}
	}
	for k := range d {
		if !slices.Contains(want, k) {
			t.Errorf("unexpected key %s = %v", k, d[k])
		}
	}
	str := func(key, want string) {
		t.Helper()
		if v, ok := d[key].(string); !ok || v != want {
			t.Errorf("%s = %#v, want the string %q", key, d[key], want)
		}
	}
	str("Label", label)
	str("WorkingDirectory", s.WorkDir)
	str("StandardOutPath", filepath.Join(s.LogDir, "stdout.log"))
	str("StandardErrorPath", filepath.Join(s.LogDir, "stderr.log"))
	if s.User != "" {
		str("UserName", s.User)
	}

	args, ok := d["ProgramArguments"].([]any)
	var got []string
	for _, a := range args {
		if a, isStr := a.(string); isStr {
			got = append(got, a)
		}
	}
	if wantArgs := []string{s.Binary, "run", "--config", s.Config}; !ok || !slices.Equal(got, wantArgs) || len(got) != len(args) {
		t.Errorf("ProgramArguments = %#v, want the strings %q", d["ProgramArguments"], wantArgs)
	}
	if v, ok := d["RunAtLoad"].(bool); !ok || !v {
		t.Errorf("RunAtLoad = %#v, want true: launchd starts it when loaded", d["RunAtLoad"])
	}
	// Restarted after a crash, not after a clean exit (a logged-out
	// WhatsApp exits 0: restarting cannot help).
	keep, ok := d["KeepAlive"].(map[string]any)
	if se, isBool := keep["SuccessfulExit"].(bool); !ok || !isBool || se || len(keep) != 1 {
		t.Errorf("KeepAlive = %#v, want the dictionary {SuccessfulExit: false}", d["KeepAlive"])
	}
	if v, ok := d["ThrottleInterval"].(uint64); !ok || v != throttle {
		t.Errorf("ThrottleInterval = %#v, want the integer %d", d["ThrottleInterval"], throttle)
	}
	// The environment: HOME and PATH, nothing that looks like a secret
	// (those come from nanoclawd.env, which the plist never holds).
	env, ok := d["EnvironmentVariables"].(map[string]any)
	if !ok {
		t.Fatalf("EnvironmentVariables = %#v, want a dictionary", d["EnvironmentVariables"])
	}
	if env["HOME"] != s.Home || env["PATH"] != strings.Join(s.Path, ":") || len(env) != 2 {
		t.Errorf("EnvironmentVariables = %#v, want HOME %s and PATH %s only", env, s.Home, strings.Join(s.Path, ":"))
	}
	for k, v := range env {
		if why := security.LooksSecret(k); why != "" {
			t.Errorf("EnvironmentVariables holds %s (%s)", k, why)
		}
		if _, isStr := v.(string); !isStr {
			t.Errorf("EnvironmentVariables %s = %#v, not a string", k, v)
		}
	}
}

// The LaunchAgent and the LaunchDaemon, read back by a property-list
// decoder, say what the Spec says, also for paths with every character
// XML escapes.
func TestPlistReadBack(t *testing.T) {
	for name, s := range map[string]Spec{"plain": plain, "awkward": awkward} {
		t.Run(name, func(t *testing.T) {
			p, err := Plist(s)
			if err != nil {
				t.Fatal(err)
			}
			checkPlist(t, readPlist(t, p), s)
			s.User = "owner"
			if p, err = Plist(s); err != nil {
				t.Fatal(err)
			}
			checkPlist(t, readPlist(t, p), s)
		})
	}
}
