package selftest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Task is what the probe is to try, handed to it on stdin.
type Task struct {
	Secret string   `json:"secret"` // what every canary holds
	Read   []string `json:"read"`   // canary files
	Write  []string `json:"write"`  // files to create outside what the run may write
	Dial   []string `json:"dial"`   // host:port to connect to directly
	Tunnel []string `json:"tunnel"` // host:port to reach through $HTTPS_PROXY (CONNECT)
	Get    []string `json:"get"`    // http:// URLs to fetch through $HTTP_PROXY
	Relay  []string `json:"relay"`  // "METHOD /path" to ask of $ANTHROPIC_BASE_URL with the run's placeholder
	Setuid string   `json:"setuid"` // a file to make setuid in the run's own folder
	Hooks  []string `json:"hooks"`  // hook files to create (with their directories) where git would run them
	Calls  bool     `json:"calls"`  // try the system calls no run needs (kernelCalls)
}

// Finding is what one attempt got.
type Finding struct {
	Probe   string `json:"probe"`
	Target  string `json:"target"`
	Reached bool   `json:"reached"`
	Detail  string `json:"detail"`
}

// Probe is `nanoclawd sandbox-probe`, the attacker `security test` starts
// inside the confinement: no SDK, only system calls. It reads a Task on
// stdin, tries each thing, and prints its findings as JSON on stdout. It
// is started by nanoclawd, not by people.
func Probe(args []string) int {
	if len(args) == 1 && args[0] == "--true" {
		return 0 // the child of the nested-namespace attempt
	}
	var t Task
	if err := json.NewDecoder(os.Stdin).Decode(&t); err != nil {
		fmt.Fprintln(os.Stderr, "nanoclawd sandbox-probe: no task on stdin; it is started by 'nanoclawd security test', not by people:", err)
		return 2
	}
	var out []Finding
	add := func(probe, target string, reached bool, format string, a ...any) {
		out = append(out, Finding{probe, target, reached, fmt.Sprintf(format, a...)})
	}
	for _, p := range t.Read {
		data, err := os.ReadFile(p)
		switch {
		case err != nil:
			add("read", p, false, "%v", err)
		default:
			add("read", p, strings.Contains(string(data), t.Secret), "read %d bytes", len(data))
		}
	}
	for _, p := range t.Write {
		err := os.WriteFile(p, []byte(t.Secret+"\n"), 0o644)
		add("write", p, err == nil, "%v", errText(err))
	}
	for _, a := range t.Dial {
		c, err := net.DialTimeout("tcp", a, 3*time.Second)
		if err != nil {
			add("dial", a, false, "%v", err)
			continue
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		add("dial", a, true, "connected: %q", line)
	}
	for _, a := range t.Tunnel {
		reached, detail := tunnel(a)
		add("tunnel", a, reached, "%s", detail)
	}
	for _, u := range t.Get {
		reached, detail := get(u)
		add("get", u, reached, "%s", detail)
	}
	for _, r := range t.Relay {
		reached, detail := relay(r)
		add("relay", r, reached, "%s", detail)
	}
	var addrs []string
	if as, err := net.InterfaceAddrs(); err == nil {
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
				addrs = append(addrs, n.IP.String())
			}
		}
	}
	add("interfaces", "the run's network interfaces", len(addrs) > 0, "addresses besides loopback: %v", addrs)
	reached, detail := nestedNamespace()
	add("namespace", "a nested namespace", reached, "%s", detail)
	for _, p := range t.Hooks {
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, []byte("#!/bin/sh\n# "+t.Secret+"\n"), 0o755)
		}
		add("hook", p, err == nil, "%v", errText(err))
	}
	if t.Calls {
		for _, c := range kernelCalls() {
			add("call", c.name, c.err == nil, "%v", errText(c.err))
		}
	}
	if t.Setuid != "" {
		reached, detail := setuid(t.Setuid)
		add("setuid", t.Setuid, reached, "%s", detail)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func proxyURL() (*url.URL, error) {
	p := os.Getenv("HTTPS_PROXY")
	if p == "" {
		return nil, fmt.Errorf("no proxy offered")
	}
	return url.Parse(p)
}

func tunnel(addr string) (bool, string) {
	pu, err := proxyURL()
	if err != nil {
		return false, err.Error()
	}
	c, err := net.DialTimeout("tcp", pu.Host, 3*time.Second)
	if err != nil {
		return false, "the gateway: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return false, err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		return false, resp.Status
	}
	line, _ := br.ReadString('\n')
	return true, fmt.Sprintf("tunnel open, the far end said %q", line)
}

// get fetches u through the proxy, also for a loopback host (the
// environment's NO_PROXY would send that one direct).
func get(u string) (bool, string) {
	pu, err := proxyURL()
	if err != nil {
		return false, err.Error()
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := client.Get(u)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return resp.StatusCode == http.StatusOK, fmt.Sprintf("%s: %.80q", resp.Status, body)
}

// relay asks the model-API relay for "METHOD /path" with this run's placeholder.
func relay(spec string) (bool, string) {
	method, path, _ := strings.Cut(spec, " ")
	base := os.Getenv("ANTHROPIC_BASE_URL")
	if base == "" {
		return false, "no relay offered"
	}
	req, err := http.NewRequest(method, strings.TrimSuffix(base, "/")+path, strings.NewReader(`{}`))
	if err != nil {
		return false, err.Error()
	}
	req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2, resp.Status
}

// setuid makes path a setuid (and setgid) program, as far as it may.
func setuid(path string) (bool, string) {
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		return false, "could not make the file: " + err.Error()
	}
	if err := os.Chmod(path, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil {
		return false, "chmod 6755: " + err.Error()
	}
	fi, err := os.Stat(path)
	if err != nil {
		return false, err.Error()
	}
	return fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0, "mode " + fi.Mode().String()
}
