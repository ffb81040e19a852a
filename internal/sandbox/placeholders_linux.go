package sandbox

import "golang.org/x/sys/unix"

const renameWorks = true

// renameNoReplace renames from to to unless to exists.
func renameNoReplace(from, to string) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
}
