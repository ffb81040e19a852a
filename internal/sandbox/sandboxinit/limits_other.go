//go:build !linux

package sandboxinit

const rlimitNproc = 7 // RLIMIT_NPROC on macOS and the BSDs
