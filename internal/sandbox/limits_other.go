//go:build !linux

package sandbox

const rlimitNproc = 7 // RLIMIT_NPROC on macOS and the BSDs
