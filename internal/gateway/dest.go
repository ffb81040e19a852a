package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
)

// rule is one entry of network.allowedDomains or deniedDomains: a domain
// name ("*", "*.example.com", "example.com") or an address or CIDR the
// operator wrote as such, with the port it was written with ("" = 443 and 80).
type rule struct {
	name   string       // lower case, no trailing dot; "" for an address rule
	prefix netip.Prefix // valid for an address or CIDR rule (an address is a /32 or /128)
	port   string
}

// parseRule reads one list entry: "example.com", "*.example.com",
// "example.com:8443", "10.0.0.5", "10.0.0.5:5432", "192.168.1.0/24",
// "[fd00::1]:8080".
func parseRule(s string) rule {
	s = strings.ToLower(strings.TrimSpace(s))
	host, port := s, ""
	if h, p, err := net.SplitHostPort(s); err == nil && isPort(p) {
		host, port = h, p
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if pfx, err := netip.ParsePrefix(host); err == nil {
		return rule{prefix: pfx.Masked(), port: port}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return rule{prefix: netip.PrefixFrom(a, a.BitLen()), port: port}
	}
	return rule{name: host, port: port}
}

// CheckRule says what is wrong with a network list entry, or nil: a CIDR
// that does not parse, a port out of range, or something that is neither
// a name nor an address.
func CheckRule(s string) error {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		h = s
	} else if !isPort(p) {
		return fmt.Errorf("%q: the port must be a number 1-65535 (write host:port)", s)
	}
	h = strings.Trim(h, "[]")
	if strings.Contains(h, "/") {
		if _, err := netip.ParsePrefix(h); err != nil {
			return fmt.Errorf("%q is not a CIDR such as 192.168.1.0/24 or fd00::/8", s)
		}
		return nil
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	if h == "" || strings.ContainsAny(h, " /:@?#") || (strings.Contains(h, "*") && h != "*" && !strings.HasPrefix(h, "*.")) {
		return fmt.Errorf("%q is not a domain (example.com, *.example.com, *), an address or a CIDR", s)
	}
	return nil
}

func isPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536
}

// portOK: a rule without a port allows 443 and 80 only.
func (ru rule) portOK(port string) bool {
	if ru.port == "" {
		return port == "443" || port == "80"
	}
	return ru.port == port
}

// Matches tells whether a domain rule covers host: "*" any host name,
// "*.example.com" every subdomain of example.com, else the name itself.
// An address rule covers the addresses it names; "*" never covers an
// address literal.
func Matches(entry, host string) bool {
	ru := parseRule(entry)
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(host); err == nil {
		return ru.prefix.IsValid() && ru.prefix.Contains(a.Unmap())
	}
	switch {
	case ru.name == "":
		return false
	case ru.name == "*":
		return true
	case strings.HasPrefix(ru.name, "*."):
		return strings.HasSuffix(host, ru.name[1:])
	}
	return host == ru.name
}

// refusal is a connection the gateway refused: why says so in words, and
// rule is the config key that decided it.
type refusal struct {
	why  string
	rule string
}

func (e *refusal) Error() string { return e.why }

const (
	allowKey = "hostSecurity.network.allowedDomains"
	denyKey  = "hostSecurity.network.deniedDomains"
)

// policy applies the domain lists to host (a name or an address literal)
// and port, before anything is resolved.
func (r *Gateway) policy(host, port string) error {
	for _, d := range r.cfg.DeniedDomains {
		if Matches(d, host) && (parseRule(d).port == "" || parseRule(d).port == port) {
			return &refusal{"listed in network.deniedDomains (" + d + ")", denyKey}
		}
	}
	if len(r.cfg.AllowedDomains) == 0 {
		return &refusal{"network.allowedDomains is empty, so this group has no network", allowKey}
	}
	other := ""
	for _, d := range r.cfg.AllowedDomains {
		if !Matches(d, host) {
			continue
		}
		if parseRule(d).portOK(port) {
			return nil
		}
		other = d
	}
	if other != "" {
		return &refusal{fmt.Sprintf("port %s is not allowed for %s (%s allows 443 and 80, or the port written as host:port)", port, host, other), allowKey}
	}
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return &refusal{"an address is reachable only when network.allowedDomains lists it (or a CIDR holding it); \"*\" covers names, not addresses", allowKey}
	}
	return &refusal{"not in network.allowedDomains", allowKey}
}

// check refuses an address a connection would go to when it leads back
// into this host or its networks (loopback, link-local, private, CGNAT,
// unique-local, multicast, unspecified, or an address of this host's own
// interfaces), unless the operator wrote that address or a CIDR holding it
// in allowedDomains. Denied addresses are refused whatever the allow list says.
func (r *Gateway) check(a netip.Addr, port string) error {
	a = a.Unmap()
	for _, d := range r.cfg.DeniedDomains {
		if ru := parseRule(d); ru.prefix.IsValid() && ru.prefix.Contains(a) {
			return &refusal{fmt.Sprintf("%s is listed in network.deniedDomains (%s)", a, d), denyKey}
		}
	}
	class := r.class(a)
	if class == "" {
		return nil
	}
	for _, d := range r.cfg.AllowedDomains {
		if ru := parseRule(d); ru.prefix.IsValid() && ru.prefix.Contains(a) && ru.portOK(port) {
			return nil
		}
	}
	return &refusal{fmt.Sprintf("%s is %s; write the address or its CIDR in network.allowedDomains to allow it", a, class), allowKey}
}

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	thisNet  = netip.MustParsePrefix("0.0.0.0/8")
	bcast    = netip.MustParseAddr("255.255.255.255")
	errNoIPs = errors.New("no address")
)

// class names the kind of inward address a is, or "" for a public one.
func (r *Gateway) class(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case r.own(a):
		return "an address of this host"
	case a.IsLinkLocalUnicast():
		return "a link-local address (where cloud metadata services live)"
	case cgnat.Contains(a):
		return "a CGNAT (100.64.0.0/10) address"
	case a.Is6() && a.IsPrivate():
		return "a unique-local (fc00::/7) address"
	case a.IsPrivate():
		return "a private (RFC 1918) address"
	case a.IsMulticast(), a == bcast:
		return "a multicast or broadcast address"
	case a.IsUnspecified(), thisNet.Contains(a):
		return "an unspecified address"
	}
	return ""
}

// own tells whether a is an address of one of this host's interfaces,
// read at each connection (an interface may gain an address at any time).
func (r *Gateway) own(a netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return true // unknown: refuse rather than risk reaching home
	}
	for _, ad := range addrs {
		if p, err := netip.ParsePrefix(ad.String()); err == nil && p.Addr().Unmap() == a {
			return true
		}
	}
	return false
}

// resolve checks host:port with the lists, looks the name up, and checks
// every address it has: one refused address refuses the name (a name that
// leads home once may do so on the next lookup). It returns the addresses
// to connect to, which the dialer checks once more.
func (r *Gateway) resolve(ctx context.Context, host, port string) ([]netip.Addr, error) {
	if err := r.policy(host, port); err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := r.lookup(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", host, err)
		}
		addrs = ips
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("look up %s: %w", host, errNoIPs)
	}
	for _, a := range addrs {
		if err := r.check(a, port); err != nil {
			return nil, &refusal{fmt.Sprintf("%s leads to %s", host, err.Error()), err.(*refusal).rule}
		}
	}
	return addrs, nil
}

// dial connects to the first of addrs that answers; the dialer's Control
// checks each address again at connect time.
func (r *Gateway) dial(ctx context.Context, addrs []netip.Addr, port string) (net.Conn, error) {
	var err error
	for _, a := range addrs {
		var c net.Conn
		if c, err = r.dialer.DialContext(ctx, "tcp", net.JoinHostPort(a.Unmap().String(), port)); err == nil {
			return c, nil
		}
		var ref *refusal
		if errors.As(err, &ref) {
			return nil, ref
		}
	}
	return nil, err
}

// checkAddr is the dialer's Control: the same check, on the address the
// socket is about to connect to.
func (r *Gateway) checkAddr(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusal{fmt.Sprintf("connect to %s: not an address", address), allowKey}
	}
	return r.check(ap.Addr(), strconv.Itoa(int(ap.Port())))
}
