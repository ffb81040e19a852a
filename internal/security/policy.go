// Package security holds the sandbox policy: its types, how the global
// policy and a group's override resolve into one effective policy, and how
// that policy becomes the options object handed to the Claude Agent SDK.
// Everything here is a pure function over values.
package security

import (
	"reflect"
	"strings"
)

// Policy is the shape shared by the config's hostSecurity block and a
// group's override. A nil or empty field means "not given".
type Policy struct {
	Sandbox        *bool    `json:"sandbox,omitempty"`
	Tools          []string `json:"tools,omitempty" validate:"omitempty,min=1,dive,required"`
	PermissionMode string   `json:"permissionMode,omitempty" validate:"omitempty,oneof=default acceptEdits dontAsk"`
	DenyRead       []string `json:"denyRead,omitempty" validate:"dive,required"`
	AllowRead      []string `json:"allowRead,omitempty" validate:"dive,required"`
	AllowWrite     []string `json:"allowWrite,omitempty" validate:"dive,required"`
	Network        *Network `json:"network,omitempty"`
	// Senders, in a group's override, are who may call its assistant (their
	// channel id, e.g. a phone number); others' messages stay context.
	Senders []string `json:"senders,omitempty" validate:"dive,required"`
	// Budget, in a group's override, limits what its model requests cost.
	Budget *Budget `json:"budget,omitempty"`
	// Env, in a group's override, names variables of agent.env that look
	// like secrets and may still enter this group's confined runs.
	Env []string `json:"env,omitempty" validate:"dive,required"`
	// Model and Provider, in a group's override, are its model (as the
	// config names it) and where its requests go; they apply to the main
	// group too.
	Model    string `json:"model,omitempty"`
	Provider string `json:"provider,omitempty"`
}

// SenderAllowed tells whether sender (a channel id such as
// "4915551234567@s.whatsapp.net" or "alice") is one of allowed, which may
// name it whole or by its part before "@", with or without a leading "+".
func SenderAllowed(allowed []string, sender string) bool {
	user, _, _ := strings.Cut(sender, "@")
	for _, a := range allowed {
		a = strings.TrimPrefix(strings.TrimSpace(a), "+")
		if strings.EqualFold(a, sender) || strings.EqualFold(a, user) {
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

// WithModel is a copy of the override p with its model set to model ("" =
// cleared: the group follows agent.model again); an override left with
// nothing in it is nil.
func (p *Policy) WithModel(model string) *Policy {
	var out Policy
	if p != nil {
		out = *p
	}
	out.Model = model
	if reflect.ValueOf(out).IsZero() {
		return nil
	}
	return &out
}
