//go:build !linux

package main

import "errors"

// unshareUser: there are no user namespaces to open outside Linux.
func unshareUser() error { return errors.New("no user namespaces on this OS") }
