// Package security holds the sandbox policy: its types, how the global
// policy and a group's override resolve into one effective policy, and how
// that policy becomes the options object handed to the Claude Agent SDK.
// Everything here is a pure function over values.
package security

import "strings"

// Policy is the shape shared by the config's hostSecurity block and a
// group's override. A nil or empty field means "not given".
type Policy struct {
	Sandbox        *bool    `json:"sandbox,omitempty"`
	Tools          []string `json:"tools,omitempty" validate:"omitempty,min=1,dive,required"`
	PermissionMode string   `json:"permissionMode,omitempty" validate:"omitempty,oneof=default acceptEdits dontAsk"`
	DenyRead       []string `json:"denyRead,omitempty" validate:"dive,required"`
	AllowWrite     []string `json:"allowWrite,omitempty" validate:"dive,required"`
	Network        *Network `json:"network,omitempty"`
	// Senders (per-group overrides only): who may trigger the agent, by
	// sender id or phone number; others' messages are context. nil = anyone.
	Senders []string `json:"senders,omitempty"`
}

// AllowsSender reports whether the sender with id (a JID such as
// "4915551234567@s.whatsapp.net", or any channel's id) may trigger the
// agent: Senders is unset, or names id, its part before '@', or that
// number with a leading '+'.
func (p *Policy) AllowsSender(id string) bool {
	if p == nil || p.Senders == nil {
		return true
	}
	user, _, _ := strings.Cut(id, "@")
	for _, s := range p.Senders {
		s = strings.TrimPrefix(strings.TrimSpace(s), "+")
		if s != "" && (s == id || s == user) {
			return true
		}
	}
	return false
}

// Network restricts the domains sandboxed commands may reach.
type Network struct {
	AllowedDomains []string `json:"allowedDomains" validate:"dive,required"`
	DeniedDomains  []string `json:"deniedDomains" validate:"dive,required"`
}
