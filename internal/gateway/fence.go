package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// The Messages API fetches on a request's behalf: a content block whose
// source is a URL (an image, a document, or any other block with a
// source.url, anywhere in the request: messages, tool results, the system
// prompt) is downloaded by the API, and a remote MCP server is connected
// to, with the owner's key, from the API's side of the world. For a
// confined group each such host must pass the same network policy as the
// group's own connections through the proxy (policy in dest.go), or the
// request is refused before it goes upstream; a web_search or web_fetch
// server tool the group may use is held to the group's domains by the
// API's own allowed_domains.

// unreachable is one host a request would have the API reach that the
// group's policy does not allow.
type unreachable struct {
	what   string // "image source", "MCP server far", …
	target string // the host, with its port unless 443 or 80: what /allow adds
	ref    *refusal
}

// unreachables checks every URL the API would fetch or connect to for m;
// mcp_servers only when they go upstream at all (mcp: the group's tools
// name them). Each member of m is re-encoded from the tree it checked, so
// the upstream reads exactly that: a key written twice, or "URL" beside
// "url", cannot mean one thing here and another there.
func (r *Gateway) unreachables(m map[string]json.RawMessage, mcp bool) []unreachable {
	var out []unreachable
	check := func(what string, raw any) {
		u, _ := raw.(string)
		target, ref := r.reach(u)
		if ref != nil && !slices.ContainsFunc(out, func(u unreachable) bool { return u.target == target }) {
			out = append(out, unreachable{what, target, ref}) // once a host: one violation, one /allow
		}
	}
	for k, raw := range m {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // numbers go on as written
		var v any
		if dec.Decode(&v) != nil {
			continue // not JSON: the upstream refuses it as we would
		}
		sources(v, func(typ string, u any) { check(strings.TrimSpace(typ+" source"), u) })
		if servers, ok := v.([]any); ok && k == "mcp_servers" && mcp {
			for _, s := range servers {
				if s, ok := s.(map[string]any); ok {
					name, _ := s["name"].(string)
					check("MCP server "+name, s["url"])
				}
			}
		}
		m[k], _ = json.Marshal(v)
	}
	return out
}

// sources calls fn for each object of a decoded JSON tree whose "source"
// is an object with a "url": the object's type and the URL (a string, or
// anything else the API would refuse).
func sources(v any, fn func(typ string, url any)) {
	switch x := v.(type) {
	case map[string]any:
		if src, ok := x["source"].(map[string]any); ok {
			if u, ok := src["url"]; ok {
				typ, _ := x["type"].(string)
				fn(typ, u)
			}
		}
		for _, c := range x {
			sources(c, fn)
		}
	case []any:
		for _, c := range x {
			sources(c, fn)
		}
	}
}

// reach checks a URL the API would fetch with the group's lists, on the
// port the URL names (443 or 80 by its scheme); target is its host as the
// group's allowedDomains would name it.
func (r *Gateway) reach(raw string) (target string, ref *refusal) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return "a URL that is not http(s)", &refusal{"the API fetches only http(s) URLs of a named host", "relay"}
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	target = host
	if port != "443" && port != "80" {
		target = net.JoinHostPort(host, port)
	}
	if err := r.policy(host, port); err != nil {
		errors.As(err, &ref)
		return target, ref
	}
	return target, nil
}

// refuseUnreachable answers a request the API would have reached beyond
// the group's policy: each host is a network violation of its own (so the
// owner's /allow code adds exactly it), and the agent gets one error the
// SDK shows and does not retry, naming each host and how to allow it.
func (r *Gateway) refuseUnreachable(w http.ResponseWriter, req *http.Request, refused []unreachable) {
	var lines []string
	for _, u := range refused {
		detail := fmt.Sprintf("%s %s: the model API would fetch %s from %s for this group, refused by the model-API relay: %s",
			req.Method, req.URL.Path, u.what, u.target, u.ref.why)
		r.report(req.Context(), u.target, detail, u.ref.rule)
		lines = append(lines, fmt.Sprintf("%s at %s (%s)", u.what, u.target, u.ref.why))
	}
	apiError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf(
		fencedText+": it would have the model API fetch from where group %s may not reach: %s. "+
			"The owner can allow a host with the /allow code of the alert they were sent, or by adding it to the group's network.allowedDomains; "+
			"until then, send the content itself (base64) instead of its URL.",
		r.cfg.Group, strings.Join(lines, "; ")))
}

// fencedText begins the agent's error for a request refused so.
const fencedText = "nanoclaw sandbox: this request was not sent"

// Fenced tells whether an agent's error is the relay's refusal of a
// request the API would have fetched for beyond the group's reach.
func Fenced(errText string) bool { return strings.Contains(errText, fencedText) }

// webTools are the server tools the API's own allowed_domains bounds.
var webTools = map[string]bool{"web_search": true, "web_fetch": true}

// fenceWebTool holds a web_search or web_fetch tool the group may use to
// the group's domains: allowed_domains becomes the group's list (the
// agent's own is replaced; an entry of it the group may not reach is
// reported), or, where the group allows any domain ("*"), blocked_domains
// gains its deniedDomains. ok is false when the group names no domain the
// API's list could hold it to: the tool must not go upstream.
func (r *Gateway) fenceWebTool(t map[string]json.RawMessage) (bad []unreachable, ok bool) {
	var own []string
	json.Unmarshal(t["allowed_domains"], &own)
	var kept []string
	for _, d := range own {
		host, _, _ := strings.Cut(d, "/") // the API takes paths too: example.com/docs
		if target, ref := r.reach("https://" + host); ref != nil {
			bad = append(bad, unreachable{str(t["name"]) + "'s allowed_domains entry", target, ref})
		} else {
			kept = append(kept, d)
		}
	}
	if slices.Contains(r.cfg.AllowedDomains, "*") {
		// Any public name: the agent's own list (as far as the group may
		// reach it) stands, else the denied names are blocked. (The API
		// takes one of the two lists, not both.)
		delete(t, "allowed_domains")
		if len(kept) > 0 {
			t["allowed_domains"], _ = json.Marshal(kept)
			return bad, true
		}
		var blocked []string
		json.Unmarshal(t["blocked_domains"], &blocked)
		blocked = append(blocked, apiDomains(r.cfg.DeniedDomains)...)
		if len(blocked) > 0 {
			t["blocked_domains"], _ = json.Marshal(blocked)
		}
		return bad, true
	}
	list := apiDomains(r.cfg.AllowedDomains)
	if len(list) == 0 {
		return bad, false
	}
	t["allowed_domains"], _ = json.Marshal(list)
	delete(t, "blocked_domains")
	return bad, true
}

// apiDomains writes network rules as the API's domain lists take them: a
// name without "*." (the API counts a domain's subdomains with it) and
// without a port; addresses, and names allowed only on other ports than
// 443 and 80, have no place there.
func apiDomains(rules []string) []string {
	var out []string
	for _, s := range rules {
		ru := parseRule(s)
		if ru.name == "" || ru.name == "*" || !(ru.portOK("443") || ru.portOK("80")) {
			continue
		}
		if name := strings.TrimPrefix(ru.name, "*."); !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
