package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

func noise() {
	fmt.Println("starting up, not a frame")
	start, end := protocol.FrameStart, protocol.FrameEnd
	fmt.Println(start) // a start with no end…
	fmt.Println(start) // …then a real frame
	fmt.Println(`{"status":"success","result":"one"}`)
	fmt.Println(end)
	fmt.Println(start) // two payload lines: not a frame
	fmt.Println(`{"status":"success",`)
	fmt.Println(`"result":"never"}`)
	fmt.Println(end)
	fmt.Println(start) // bad JSON: dropped
	fmt.Println(`{not json`)
	fmt.Println(end)
	fmt.Println(start)
	fmt.Println(`{"status":"success","result":null}`)
	fmt.Println(end)
	result("two", "")
	fmt.Print("trailing text without newline")
}

func flood(mib int) {
	big := strings.Repeat("x", 2<<20)
	frame(protocol.Result(big))
	fmt.Println(big + big[:1<<20])
	line := strings.Repeat("flood ", 170) + "\n" // ~1 KiB
	chunk := strings.Repeat(line, 64)
	for n := 0; n < mib*16; n++ {
		os.Stdout.WriteString(chunk)
		os.Stderr.WriteString(chunk)
	}
}

func fork(next string, in input, raw []byte) {
	self, err := os.Executable()
	if err != nil {
		fatal("%v", err)
	}
	c := exec.Command(self)
	c.Env = append(os.Environ(), "TESTAGENT_ROLE=grandchild")
	c.Stdout, c.Stderr = os.Stdout, os.Stderr // holds the pipes open, like a stray tool would
	if err := c.Start(); err != nil {
		fatal("starting the grandchild: %v", err)
	}
	result(fmt.Sprintf("forked %d", c.Process.Pid), "")
	if next != "" {
		do(next, in, raw)
	}
}
