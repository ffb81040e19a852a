package sandbox

import (
	"encoding/binary"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The rules on arguments the kernel reads as 32-bit values (an ioctl's
// command, a persona, a socket's family and protocol) are written here in
// BPF by hand: the policy library compares all 64 bits of a register, so
// TIOCSTI|1<<32 — which the kernel truncates to TIOCSTI — would not match
// its rule. These compare the low 32 bits only, as the kernel does.

// argRule refuses, with Action, a call whose argument Arg is (Allowed
// false) or is not (Allowed true) one of Values; When narrows it to calls
// whose argument When[0] equals When[1].
type argRule struct {
	Call    string
	Arg     uint32
	Values  []uint32
	Allowed bool
	When    *[2]uint32
	Action  seccomp.Action
}

// socketFamilies are the only families a run may open sockets of: local,
// IPv4 and IPv6 (its own loopback and the gateway), and netlink for the
// routing table (getifaddrs). AF_VSOCK, AF_PACKET, AF_ALG, the other
// netlink protocols and the rest reach kernel code no agent needs.
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// personaQuery is personality(0xffffffff), which only reads the persona.
const personaQuery = 0xffffffff

// perLinux is PER_LINUX, the default persona.
const perLinux = 0

var argRules = []argRule{
	{Call: "ioctl", Arg: 1, Values: []uint32{unix.TIOCSTI, unix.TIOCLINUX}, Action: errEPERM},
	// Only the default persona: no READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE
	// and the like, which turn off the kernel's own hardening.
	{Call: "personality", Arg: 0, Values: []uint32{perLinux, personaQuery}, Allowed: true, Action: errEPERM},
	{Call: "socket", Arg: 0, Values: socketFamilies, Allowed: true, Action: seccomp.ActionErrno | seccomp.Action(unix.EAFNOSUPPORT)},
	{Call: "socketpair", Arg: 0, Values: socketFamilies, Allowed: true, Action: seccomp.ActionErrno | seccomp.Action(unix.EAFNOSUPPORT)},
	{Call: "socket", Arg: 2, Values: []uint32{unix.NETLINK_ROUTE}, Allowed: true, When: &[2]uint32{0, unix.AF_NETLINK},
		Action: seccomp.ActionErrno | seccomp.Action(unix.EPROTONOSUPPORT)},
}

// argOffset is where the low 32 bits of argument i lie in seccomp_data.
func argOffset(i uint32) uint32 {
	off := 16 + 8*i
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 { // big-endian
		off += 4
	}
	return off
}

// argPrefix is the rules as BPF, each falling through to what follows
// when it does not refuse the call. names maps call names to numbers on
// this architecture; a call it lacks has no rule.
func argPrefix(names map[string]int) []bpf.Instruction {
	var out []bpf.Instruction
	for _, r := range argRules {
		nr, ok := names[r.Call]
		if !ok {
			continue
		}
		var body []bpf.Instruction
		if r.When != nil {
			// Not the case this rule is about: skip the rest of the rule.
			body = append(body, bpf.LoadAbsolute{Off: argOffset(r.When[0]), Size: 4}, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: r.When[1], SkipTrue: 0xff})
		}
		body = append(body, bpf.LoadAbsolute{Off: argOffset(r.Arg), Size: 4})
		n := len(r.Values)
		for i, v := range r.Values {
			// After this comparison come n-1-i more, then (allowed) the
			// refusal, or (refused values) a jump past it, then the refusal.
			left := uint8(n - 1 - i)
			if r.Allowed {
				body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: 0xff})
			} else {
				body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: left + 1})
			}
		}
		if !r.Allowed {
			body = append(body, bpf.Jump{Skip: 1})
		}
		body = append(body, bpf.RetConstant{Val: uint32(r.Action)})
		// Resolve the 0xff jumps: to the end of the rule (past the refusal).
		for i, in := range body {
			if j, ok := in.(bpf.JumpIf); ok && j.SkipTrue == 0xff {
				j.SkipTrue = uint8(len(body) - 1 - i)
				body[i] = j
			}
		}
		out = append(out, bpf.LoadAbsolute{Off: 0, Size: 4}, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(nr), SkipTrue: uint8(len(body))})
		out = append(out, body...)
	}
	return out
}
