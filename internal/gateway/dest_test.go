package gateway

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// listen starts a listener on addr that greets and counts each connection.
func listen(t *testing.T, addr string) (port string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("no listener on %s here: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			fmt.Fprint(c, "HTTP/1.0 200 OK\r\n\r\nhello\n")
			c.Close()
		}
	}()
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, accepted
}

// hostAddr is a non-loopback IPv4 address of this host, or "" if it has none.
func hostAddr() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// names is a resolver of the test's own: no name has to exist, and an
// address that is not this machine's is only ever looked at, never dialed.
func names(m map[string]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		a, ok := m[host]
		if !ok {
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
}

// tunnel asks the gateway for a CONNECT tunnel and returns the status, or
// the first line the far end sent.
func tunnel(t *testing.T, run *Gateway, hostport string) string {
	t.Helper()
	c, err := net.Dial("unix", run.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hostport, hostport)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err.Error()
	}
	if resp.StatusCode != 200 {
		return resp.Status
	}
	line, _ := br.ReadString('\n')
	return "reached: " + line
}

// Each class of address that leads back into the host or its networks is
// refused for a name that resolves there and for the literal, with "*"
// allowed; each refusal is audited with the host and the reason; and
// nothing is dialed. Only listeners of this machine are ever targets.
func TestDestinationClassesAreRefused(t *testing.T) {
	loopPort, loopHits := listen(t, "127.0.0.2:0")
	resolver := map[string]string{
		"home.test": "127.0.0.2", "home6.test": "::1", "metadata.test": "169.254.169.254", "ll6.test": "fe80::1",
		"rfc1918-10.test": "10.1.2.3", "rfc1918-172.test": "172.16.5.4", "rfc1918-192.test": "192.168.1.10",
		"cgnat.test": "100.64.0.1", "ula.test": "fd12:3456::1", "mcast.test": "224.0.0.251", "mcast6.test": "ff02::1",
		"zero.test": "0.0.0.0", "zero6.test": "::", "mapped.test": "::ffff:127.0.0.2",
	}
	var lanPort string
	var lanHits *atomic.Int32
	lan := hostAddr()
	if lan != "" {
		lanPort, lanHits = listen(t, net.JoinHostPort(lan, "0"))
		resolver["lan.test"] = lan
	}
	rep := &reports{}
	run, _ := open(t, Config{Group: "family", AllowedDomains: []string{"*"}, Lookup: names(resolver), Reporter: rep})
	cases := []struct{ host, port, reason string }{
		{"127.0.0.2", loopPort, `"*" covers names, not addresses`},
		{"::1", "443", `"*" covers names, not addresses`},
		{"169.254.169.254", "80", `"*" covers names, not addresses`},
		{"home.test", loopPort, "port " + loopPort + " is not allowed"},
		{"home.test", "443", "a loopback address"},
		{"mapped.test", "443", "a loopback address"},
		{"home6.test", "443", "a loopback address"},
		{"metadata.test", "80", "a link-local address"},
		{"ll6.test", "443", "a link-local address"},
		{"rfc1918-10.test", "443", "a private (RFC 1918) address"},
		{"rfc1918-172.test", "443", "a private (RFC 1918) address"},
		{"rfc1918-192.test", "443", "a private (RFC 1918) address"},
		{"cgnat.test", "443", "a CGNAT"},
		{"ula.test", "443", "a unique-local"},
		{"mcast.test", "443", "a multicast"},
		{"mcast6.test", "443", "a multicast"},
		{"zero.test", "443", "an unspecified address"},
		{"zero6.test", "443", "an unspecified address"},
	}
	if lan != "" {
		cases = append(cases, struct{ host, port, reason string }{lan, lanPort, `"*" covers names, not addresses`},
			struct{ host, port, reason string }{"lan.test", lanPort, "port " + lanPort + " is not allowed"},
			struct{ host, port, reason string }{"lan.test", "443", "an address of this host"})
	}
	for _, c := range cases {
		if got := tunnel(t, run, net.JoinHostPort(c.host, c.port)); !strings.HasPrefix(got, "403") {
			t.Errorf("CONNECT %s:%s: %q, want 403", c.host, c.port, got)
		}
	}
	if loopHits.Load() != 0 || (lanHits != nil && lanHits.Load() != 0) {
		t.Errorf("a refused destination was dialed: loopback %d, LAN %v", loopHits.Load(), lanHits)
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.vs) != len(cases) {
		t.Fatalf("%d refusals audited for %d attempts: %+v", len(rep.vs), len(cases), rep.vs)
	}
	for i, c := range cases {
		v := rep.vs[i]
		if v.Kind != "network" || v.Target != c.host || !strings.Contains(v.Detail, c.reason) || v.Action != "blocked" {
			t.Errorf("CONNECT %s audited as %+v, want target %s and %q", c.host, v, c.host, c.reason)
		}
	}
}

// An address is reachable when the operator wrote it, or a CIDR holding
// it, in allowedDomains, on the port written (443 and 80 without one); a
// name the lists allow on that port may then resolve there too.
func TestWrittenAddressesAreAllowed(t *testing.T) {
	loopPort, loopHits := listen(t, "127.0.0.2:0")
	otherPort, otherHits := listen(t, "127.0.0.3:0")
	rep := &reports{}
	run, _ := open(t, Config{Group: "family", AllowedDomains: []string{"*", "db.test:" + loopPort, "other.test:" + otherPort, "127.0.0.0/30:" + loopPort},
		Lookup: names(map[string]string{"db.test": "127.0.0.2", "other.test": "127.0.0.3"}), Reporter: rep})
	for _, h := range []string{"127.0.0.2", "db.test"} {
		if got := tunnel(t, run, net.JoinHostPort(h, loopPort)); !strings.Contains(got, "reached: HTTP/1.0 200") {
			t.Errorf("%s inside a written CIDR: %q", h, got)
		}
	}
	if loopHits.Load() != 2 {
		t.Errorf("the written address took %d connections, want 2", loopHits.Load())
	}
	// The CIDR's port only; another listener outside the CIDR is refused.
	for _, hp := range []string{"127.0.0.2:" + otherPort, "127.0.0.3:" + otherPort, "other.test:" + otherPort} {
		if got := tunnel(t, run, hp); !strings.HasPrefix(got, "403") {
			t.Errorf("%s: %q, want 403", hp, got)
		}
	}
	if otherHits.Load() != 0 {
		t.Errorf("an address outside the written CIDR was dialed")
	}
	if len(rep.vs) != 3 {
		t.Errorf("audited %d, want 3: %+v", len(rep.vs), rep.vs)
	}
}

// Ports are 443 and 80 unless the rule is written host:port.
func TestPortsAre443And80UnlessWritten(t *testing.T) {
	rep := &reports{}
	run, _ := open(t, Config{Group: "family", AllowedDomains: []string{"api.example.com", "db.example.com:5432"},
		Lookup: names(map[string]string{}), Reporter: rep})
	for _, hp := range []string{"api.example.com:8443", "api.example.com:22", "db.example.com:443", "db.example.com:5433"} {
		if got := tunnel(t, run, hp); !strings.HasPrefix(got, "403") {
			t.Errorf("%s: %q, want 403", hp, got)
		}
	}
	if len(rep.vs) != 4 || !strings.Contains(rep.vs[0].Detail, "port 8443 is not allowed") {
		t.Errorf("audited: %+v", rep.vs)
	}
	// Allowed by the lists: the lookup fails (502), which is no refusal.
	if got := tunnel(t, run, "db.example.com:5432"); !strings.HasPrefix(got, "502") {
		t.Errorf("db.example.com:5432: %q, want 502 (allowed, no such host)", got)
	}
	if len(rep.vs) != 4 {
		t.Errorf("a failed lookup was audited as a refusal: %+v", rep.vs[4:])
	}
}

// A plain-HTTP proxy request is checked like a tunnel: to a loopback port
// that is not the gateway itself it is refused (403, not the relay's 401)
// and audited.
func TestPlainHTTPIsCheckedAndAudited(t *testing.T) {
	port, hits := listen(t, "127.0.0.1:0")
	rep := &reports{}
	run, _ := open(t, Config{Group: "family", AllowedDomains: []string{"*", "home.test:" + port}, Self: "127.0.0.1:3128",
		Lookup: names(map[string]string{"home.test": "127.0.0.1"}), Reporter: rep})
	// A client that sends every http:// request to the gateway as its proxy.
	client := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "127.0.0.1:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", run.socket)
		}}}
	for _, u := range []string{"http://127.0.0.1:" + port + "/admin", "http://home.test:" + port + "/", "http://localhost:3128/v1/messages"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s: %d, want 403", u, resp.StatusCode)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("the loopback listener took %d connections", hits.Load())
	}
	if len(rep.vs) != 3 || rep.vs[0].Target != "127.0.0.1" || rep.vs[1].Target != "home.test" || !strings.Contains(rep.vs[1].Detail, "loopback") {
		t.Errorf("audited: %+v", rep.vs)
	}
}

// The dialer's own check refuses at connect time what the policy check
// would: one check, applied twice.
func TestConnectTimeCheck(t *testing.T) {
	run, _ := open(t, Config{Group: "family", AllowedDomains: []string{"*", "127.0.0.5"}})
	for addr, refused := range map[string]bool{"127.0.0.1:443": true, "169.254.169.254:80": true, "10.0.0.1:443": true,
		"[::1]:443": true, "127.0.0.5:443": false, "127.0.0.5:8080": true, "93.184.216.34:443": false} {
		err := run.checkAddr(context.Background(), "tcp", addr, nil)
		var ref *refusal
		if got := errors.As(err, &ref); got != refused {
			t.Errorf("connect to %s: %v, refused = %v", addr, err, refused)
		}
	}
}

func TestCheckRule(t *testing.T) {
	for rule, ok := range map[string]bool{
		"example.com": true, "*.example.com": true, "*": true, "example.com:8443": true, "10.0.0.5": true,
		"192.168.1.0/24": true, "192.168.1.0/24:5432": true, "[fd00::1]:8080": true, "fd00::/8": true,
		"10.0.0.0/33": false, "example.com:0": false, "example.com:99999": false, "http://example.com": false,
		"ex*ample.com": false, "user@example.com": false,
	} {
		if err := CheckRule(rule); (err == nil) != ok {
			t.Errorf("CheckRule(%q) = %v, want ok %v", rule, err, ok)
		}
	}
}
