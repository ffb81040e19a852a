// Command nanoclawd-init is the first process inside a confined run's
// sandbox: the daemon starts it, beside itself, in place of `nanoclawd
// sandbox-init` (the same code, sandboxinit.Main). Being small, it is running
// in a few milliseconds; the whole nanoclawd spends tens initialising
// packages a sandbox never uses. It is not meant to be run by people.
package main

import (
	"os"

	"github.com/nanoclawd/nanoclawd/internal/sandbox/sandboxinit"
)

func main() { os.Exit(sandboxinit.Main(os.Args[1:])) }
