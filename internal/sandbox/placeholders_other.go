//go:build !linux

package sandbox

import "errors"

// Elsewhere no sandbox makes placeholders (Seatbelt has no mount points).
const renameWorks = false

func renameNoReplace(from, to string) error { return errors.ErrUnsupported }
