//go:build !linux

package main

import "errors"

func kernelCalls() map[string]error { return nil }

func holdMemfd(int) (int, error) { return 0, errors.New("no memfd on this OS") }
