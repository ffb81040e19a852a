package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/joho/godotenv"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// nanoclawd.env, beside the config, holds secrets a service manager does
// not pass (ANTHROPIC_API_KEY, a bot token, a metrics token). Its
// variables join the process's environment before the config is read, so
// a ${VAR} in the config can come from it, and again at each reload, so a
// key `setup` saves while the daemon runs is used from the next agent run
// on. The environment the process started with wins over the file.

// EnvFile is the env file beside the config file at configFile.
func EnvFile(configFile string) string {
	return filepath.Join(filepath.Dir(configFile), layout.EnvFile)
}

// fromFile is what this process set from its env file: name → value.
var fromFile struct {
	mu   sync.Mutex
	vars map[string]string
}

// LoadEnv sets the variables of the env file beside configFile that the
// process's own environment does not set, replaces those an earlier call
// set that the file now says otherwise, and unsets those it no longer
// holds. It returns the names whose values changed. A missing file holds
// nothing; a file others can read is refused.
func LoadEnv(configFile string) (changed []string, err error) {
	abs, err := filepath.Abs(configFile)
	if err != nil {
		return nil, err
	}
	path := EnvFile(abs)
	vars := map[string]string{}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%s holds secrets but others may read it (mode %v): run chmod 600 %s", path, fi.Mode().Perm(), path)
	default:
		if vars, err = godotenv.Read(path); err != nil {
			return nil, fmt.Errorf("%s: %w (write one NAME=value a line)", path, err)
		}
	}
	fromFile.mu.Lock()
	defer fromFile.mu.Unlock()
	next := map[string]string{}
	for name, v := range vars {
		old, ours := fromFile.vars[name]
		if _, set := os.LookupEnv(name); set && !ours {
			continue // the environment's own
		}
		next[name] = v
		if !ours || old != v {
			os.Setenv(name, v)
			changed = append(changed, name)
		}
	}
	for name := range fromFile.vars {
		if _, kept := vars[name]; !kept {
			os.Unsetenv(name)
			changed = append(changed, name)
		}
	}
	fromFile.vars = next
	slices.Sort(changed)
	return changed, nil
}

// FromEnvFile lists the variables set from the env file, sorted.
func FromEnvFile() []string {
	fromFile.mu.Lock()
	defer fromFile.mu.Unlock()
	return slices.Sorted(maps.Keys(fromFile.vars))
}
