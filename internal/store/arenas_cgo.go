//go:build linux && cgo

package store

/*
#include <malloc.h>

static void limit_arenas(int n) {
#ifdef M_ARENA_MAX
	mallopt(M_ARENA_MAX, n);
#endif
}
*/
import "C"

// LimitMallocArenas keeps glibc to two malloc arenas for the rest of the
// process. SQLite allocates on whichever OS thread Go runs its call on,
// and glibc gives threads arenas of their own (up to eight per core), each
// keeping what was freed in it: in a 30-minute soak the daemon's C memory
// kept growing (from 8 to 40 MiB) with ten arenas of about 2 MiB each;
// with two it stays at about half (the chaos soak measures it). The
// daemon calls it at start; elsewhere (and off glibc) it does nothing.
func LimitMallocArenas() { C.limit_arenas(2) }
