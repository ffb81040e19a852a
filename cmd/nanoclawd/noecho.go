//go:build linux || darwin

package main

import "golang.org/x/sys/unix"

// noEcho stops the terminal on fd from echoing what is typed (a pasted
// secret) until restore is called. It is done before the prompt is shown,
// so nothing typed right after the prompt is echoed either.
func noEcho(fd int) (restore func(), err error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ECHONL
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &quiet); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}
