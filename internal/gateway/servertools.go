package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The Messages API can act on the network itself: server tools (web
// search, web fetch, code execution, …), remote MCP servers
// (mcp_servers) and the beta headers that enable them. For a confined
// group that would be a way around its allowedDomains with the owner's
// key, so the relay takes them out of the request unless the group's
// tools name them ("web_search", "web_fetch", "code_execution", a
// tool's type such as "web_search_20250305", or "mcp_servers"), and
// audits what it took out. What it lets through is held to the group's
// network policy (fence.go): URL sources and MCP servers by host, web
// search and fetch by their allowed_domains.

// betaFeatures maps a beta header's prefix to the name that allows it.
var betaFeatures = map[string]string{
	"mcp-client-": "mcp_servers", "code-execution-": "code_execution",
	"web-fetch-": "web_fetch", "web-search-": "web_search",
}

// modelOnly rewrites a confined group's request body without what would
// make the API act on the network for it; ok is false when the request
// was refused (answered already).
func (r *Gateway) modelOnly(w http.ResponseWriter, req *http.Request, body []byte) ([]byte, bool) {
	target := req.Method + " " + req.URL.Path
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		r.refuseRelay(w, req, target, http.StatusBadRequest, "invalid_request_error", "the request body is not a JSON object")
		return nil, false
	}
	allowed := func(names ...string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return n != "" && slices.Contains(r.cfg.Tools, n) })
	}
	if refused := r.unreachables(m, allowed("mcp_servers")); len(refused) > 0 {
		r.refuseUnreachable(w, req, refused)
		return nil, false
	}
	var removed []string
	var unfenced []unreachable // web tools' own allowed_domains beyond the group's reach
	var unheld []string        // web tools the group's domains cannot bound
	if raw, ok := m["tools"]; ok {
		var tools []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			r.refuseRelay(w, req, target, http.StatusBadRequest, "invalid_request_error", "the request's tools are not a list of objects")
			return nil, false
		}
		kept := tools[:0]
		var dropped []string
		fenced := false
		for _, t := range tools {
			typ, name := str(t["type"]), str(t["name"])
			server := typ != "" && typ != "custom"
			if !server || allowed(name, typ, family(typ)) {
				if server && webTools[family(typ)] {
					bad, ok := r.fenceWebTool(t)
					unfenced, fenced = append(unfenced, bad...), true
					if !ok {
						unheld = append(unheld, typ)
						dropped = append(dropped, name)
						continue
					}
				}
				kept = append(kept, t)
				continue
			}
			removed = append(removed, "server tool "+typ)
			dropped = append(dropped, name)
		}
		if fenced || len(dropped) > 0 {
			if len(kept) == 0 {
				delete(m, "tools")
			} else {
				m["tools"], _ = json.Marshal(kept)
			}
		}
		if len(dropped) > 0 {
			var choice struct{ Name string }
			if json.Unmarshal(m["tool_choice"], &choice) == nil && (slices.Contains(dropped, choice.Name) || len(kept) == 0) {
				delete(m, "tool_choice")
			}
		}
	}
	if _, ok := m["mcp_servers"]; ok && !allowed("mcp_servers") {
		delete(m, "mcp_servers")
		removed = append(removed, "mcp_servers")
	}
	if h := req.Header.Values("Anthropic-Beta"); len(h) > 0 {
		var keep []string
		for _, v := range strings.Split(strings.Join(h, ","), ",") {
			v = strings.TrimSpace(v)
			if feat := betaFeature(v); feat != "" && !allowed(feat) {
				removed = append(removed, "beta "+v)
				continue
			}
			if v != "" {
				keep = append(keep, v)
			}
		}
		req.Header.Del("Anthropic-Beta")
		if len(keep) > 0 {
			req.Header.Set("Anthropic-Beta", strings.Join(keep, ","))
		}
	}
	for _, u := range unfenced {
		r.report(req.Context(), u.target, fmt.Sprintf("%s %s: %s named %s, which this group may not reach (%s): left out of the tool's domains",
			req.Method, req.URL.Path, u.what, u.target, u.ref.why), u.ref.rule)
	}
	if len(unheld) > 0 {
		r.report(req.Context(), target, target+": the model-API relay removed "+strings.Join(unheld, ", ")+
			": this group's network.allowedDomains names no domain the API's allowed_domains could hold it to; add the domains it may reach there", "relay")
	}
	if len(removed) > 0 {
		r.report(req.Context(), target, target+": the model-API relay removed what would make the API act on the network for this group ("+
			strings.Join(removed, ", ")+"); name them in the group's override \"tools\" (e.g. \"web_search\", \"mcp_servers\") to allow them", "relay")
	}
	// Re-encoded whatever was removed: the upstream reads exactly what was
	// checked (no duplicate key hides a second "tools").
	out, err := json.Marshal(m)
	if err != nil {
		r.refuseRelay(w, req, target, http.StatusBadRequest, "invalid_request_error", "the request body cannot be re-encoded")
		return nil, false
	}
	return out, true
}

// family is a server tool's type without its version: web_search_20250305
// → web_search.
func family(typ string) string {
	i := strings.LastIndex(typ, "_")
	if i < 0 {
		return typ
	}
	if strings.Trim(typ[i+1:], "0123456789") == "" {
		return typ[:i]
	}
	return typ
}

func betaFeature(v string) string {
	for prefix, feat := range betaFeatures {
		if strings.HasPrefix(strings.ToLower(v), prefix) {
			return feat
		}
	}
	return ""
}

func str(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}
