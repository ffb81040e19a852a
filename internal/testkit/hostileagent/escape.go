package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// escape tries, from the group's folder (its working directory), what
// would run later as someone else or open the kernel up:
//
//   - the owner's git: rename the folder's .git away and make a new one
//     whose core.fsmonitor is cmd, make a nested sub/.git the same way, and
//     a .git/commondir pointing at a repository of its own; write hooks
//     running cmd into .githooks, .husky and tools/hooks;
//   - a setuid shell: copy /bin/sh and set the setuid bit, by chmod and by
//     creating the file with that mode;
//   - nested user namespaces (unshare -Ur), a write to /dev, and filling
//     /dev/shm past its bound.
func escape(cmd string, say func(string, ...any)) {
	try := func(what string, err error) {
		if err != nil {
			say("ESCAPE %s: refused: %v", what, err)
		} else {
			say("ESCAPE %s: ok", what)
		}
	}
	try("rename .git", os.Rename(".git", ".git-away"))
	try("new .git", repo(".git", cmd))
	try("nested sub/.git", repo(filepath.Join("sub", ".git"), cmd))
	try("nested deep/er/.git", repo(filepath.Join("deep", "er", ".git"), cmd))
	try(".git/commondir", os.WriteFile(filepath.Join(".git", "commondir"), []byte("../sub/.git\n"), 0o644))
	try(".envrc", os.WriteFile(filepath.Join("sub", ".envrc"), []byte(cmd+"\n"), 0o644))
	// Hooks where git looks for them: the hook managers' directories and
	// the one the owner's core.hooksPath names (the tests use tools/hooks).
	for _, h := range []string{".githooks/pre-commit", ".husky/pre-commit", "tools/hooks/pre-commit"} {
		err := os.MkdirAll(filepath.Dir(h), 0o755)
		if err == nil {
			err = os.WriteFile(h, []byte("#!/bin/sh\n"+cmd+"\n"), 0o755)
		}
		try("hook "+h, err)
	}

	sh, err := os.ReadFile("/bin/sh")
	if err == nil {
		err = os.WriteFile("sh-copy", sh, 0o755)
	}
	try("copy /bin/sh", err)
	// Raw modes: os.Chmod and os.OpenFile take Go's FileMode bits.
	try("chmod 4755 sh-copy", syscall.Chmod("sh-copy", 0o4755))
	try("chmod 2755 sh-copy", syscall.Chmod("sh-copy", 0o2755))
	fd, err := syscall.Open("sh-made-setuid", syscall.O_CREAT|syscall.O_WRONLY, 0o4755)
	if err == nil {
		syscall.Write(fd, sh)
		syscall.Close(fd)
		if fi, _ := os.Stat("sh-made-setuid"); fi != nil && fi.Mode()&os.ModeSetuid == 0 {
			err = fmt.Errorf("made without the setuid bit")
		}
	}
	try("create 4755 sh-made-setuid", err)

	out, err := exec.Command("unshare", "-Ur", "true").CombinedOutput()
	try("unshare -Ur true", wrap(err, out))
	try("unshare(CLONE_NEWUSER)", unshareUser())
	try("write /dev/escape", os.WriteFile("/dev/escape", []byte("x"), 0o644))
	big := make([]byte, 1<<20)
	f, err := os.Create("/dev/shm/fill")
	n := 0
	for ; err == nil && n < 1024; n++ {
		_, err = f.Write(big)
	}
	say("ESCAPE /dev/shm filled %d MiB: %v", n, err)
	for name, err := range kernelCalls() {
		try(name, err)
	}
}

// repo makes a git repository at dir whose core.fsmonitor is cmd: git
// runs that hook on every status.
func repo(dir, cmd string) error {
	for _, d := range []string{"objects", "refs/heads"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		return err
	}
	cfg := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = " + cmd + "\n"
	return os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o644)
}

func wrap(err error, out []byte) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
}
