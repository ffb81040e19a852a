package config

import _ "embed"

// Template is the config a fresh clone runs with — every key at its
// default with a comment, every tool on a line of its own — as committed
// at the top of the repository (nanoclaw.config.jsonc). The binary carries
// this copy, never the owner's file (their values and secrets stay out of
// it); a test keeps it identical to the committed file. Set starts a
// missing config from it.
//
//go:embed template.jsonc
var Template []byte
