//go:build !linux || !cgo

package store

// LimitMallocArenas does nothing here: only glibc's malloc makes an arena
// per thread (see arenas_cgo.go).
func LimitMallocArenas() {}
