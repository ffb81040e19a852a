// Package nanoclawd holds what the binary carries from the top of the
// repository: the config template.
package nanoclawd

import _ "embed"

// ConfigTemplate is nanoclaw.config.template.jsonc: every key with its
// default and a comment, every tool on a line of its own. It ships inside
// the binary; an owner's nanoclaw.config.jsonc starts as a copy of it and
// is theirs to change (it is not tracked by git).
//
//go:embed nanoclaw.config.template.jsonc
var ConfigTemplate []byte
