package layout

import (
	"path/filepath"
	"strconv"
	"unicode/utf16"
)

// SessionClaudeDir is a confined run's Claude config dir (CLAUDE_CONFIG_DIR),
// in its session directory; the main group's runs use the owner's.
const SessionClaudeDir = "claude"

// claudeNameMax is how long a project name the Claude CLI keeps whole.
const claudeNameMax = 200

// ClaudeProject is where the Claude CLI with the config dir configDir keeps
// the transcripts of the sessions it runs in cwd (what a resume reads):
// projects/ and cwd with every UTF-16 unit but an ASCII letter or digit
// made "-"; a name past 200 units is cut there and given the hash of the
// whole, as the CLI names it. The name follows the folder's absolute path,
// so a restore into another place must move the transcripts (backup).
func ClaudeProject(configDir, cwd string) string {
	units := utf16.Encode([]rune(cwd))
	name := make([]byte, len(units))
	var hash int32 // JavaScript's (h << 5) - h + unit, in 32 bits
	for i, u := range units {
		name[i] = '-'
		if u < 128 && ('a' <= u && u <= 'z' || 'A' <= u && u <= 'Z' || '0' <= u && u <= '9') {
			name[i] = byte(u)
		}
		hash = hash*31 + int32(u)
	}
	if len(name) > claudeNameMax {
		abs := int64(hash)
		if abs < 0 {
			abs = -abs
		}
		name = append(name[:claudeNameMax:claudeNameMax], "-"+strconv.FormatInt(abs, 36)...)
	}
	return filepath.Join(configDir, "projects", string(name))
}
