// Package approvals is the owner's answer to an alert, given from the main
// chat: the short codes alerts offer (codes.go), and the commands /allow,
// /undo, /pause, /resume and /groups (commands.go), which the daemon
// carries out itself, before any agent sees the message — so nothing a
// group's prompt or agent says can approve anything.
package approvals

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// The override keys an /allow can add to, and how long a code is good for.
const (
	KeyDomains    = "network.allowedDomains"
	KeyAllowRead  = "allowRead"
	KeyAllowWrite = "allowWrite"

	CodeTTL = 24 * time.Hour
)

// codeAlphabet leaves out what reads alike on a phone (0/O, 1/I/L).
const codeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// Offer is the narrowest rule that would have allowed v: the override key
// of v's group and the value to add to it. ok is false when no rule of a
// group's override could allow v — a deny rule, another group's files, a
// daemon limit, an IP address (the gateway's check of private and local
// addresses is not a domain rule) — and when v is only what the agent's
// own output said (action "reported"): the agent could have made it up to
// have the owner allow something.
func Offer(v security.Violation) (key, value string, ok bool) {
	if v.Action != "blocked" || v.Group == "" {
		return "", "", false
	}
	switch {
	case v.Kind == security.KindNetwork && v.Rule == "hostSecurity.network.allowedDomains" && !strings.Contains(v.Detail, "CIDR"):
		// (A refusal that names a CIDR was of an address — private, local
		// or the host's own — which no domain rule opens.)
		key = KeyDomains
		value, ok = domain(v.Target)
	case v.Kind == security.KindFilesystem && v.Rule == "hostSecurity.allowWrite":
		key, value, ok = KeyAllowWrite, v.Target, absClean(v.Target)
	case v.Kind == security.KindFilesystem && v.Rule == "confinement":
		key, value, ok = KeyAllowRead, v.Target, absClean(v.Target)
	}
	if !ok {
		return "", "", false
	}
	return key, value, true
}

// domain is the allowedDomains entry for a refused host[:port]: the name,
// with the port only when it is not 443 or 80 (which a bare name allows).
func domain(target string) (string, bool) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		host, port = target, ""
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" || net.ParseIP(strings.Trim(host, "[]")) != nil || strings.ContainsAny(host, "*/ \t") {
		return "", false
	}
	if port == "" || port == "443" || port == "80" {
		return host, true
	}
	return net.JoinHostPort(host, port), true
}

func absClean(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// IssueTx stores a fresh code for v's offer inside the caller's
// transaction (the alert's), and returns it; "" when v has no offer.
func IssueTx(ctx context.Context, tx *store.Tx, v security.Violation, now time.Time) (string, error) {
	key, value, ok := Offer(v)
	if !ok {
		return "", nil
	}
	// Codes of a week ago are forgotten, so the short space never fills.
	if _, err := tx.ExecContext(ctx, `DELETE FROM allow_codes WHERE created_at < ?`, now.Add(-7*CodeTTL).UnixMilli()); err != nil {
		return "", fmt.Errorf("approvals: prune codes: %w", err)
	}
	for range 20 {
		code, err := newCode(3)
		if err != nil {
			return "", err
		}
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO allow_codes (code, grp, key, value, created_at) VALUES (?, ?, ?, ?, ?)`,
			code, v.Group, key, value, now.UnixMilli())
		if err != nil {
			return "", fmt.Errorf("approvals: store code: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return code, nil
		}
	}
	return "", nil // every try taken: the alert goes out without a code
}

func newCode(n int) (string, error) {
	b := make([]byte, n)
	for i := range b {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(codeAlphabet))))
		if err != nil {
			return "", fmt.Errorf("approvals: new code: %w", err)
		}
		b[i] = codeAlphabet[k.Int64()]
	}
	return string(b), nil
}

// Line is the last line of an alert that offers code for group.
func Line(code, group string) string {
	return fmt.Sprintf("Reply /allow %s to allow this for %s.", code, group)
}

// add returns a copy of the override o (nil: none) with value added under
// key, and whether it was not there already. An override that does not
// list allowedDomains yet starts from the list the group has now (global),
// since an override's list replaces the global one: the change only adds.
func add(o *security.Policy, global security.Policy, key, value string) (*security.Policy, bool) {
	p := clonePolicy(o)
	list := p.field(key, global)
	for _, s := range *list {
		if s == value {
			return p.Policy, false
		}
	}
	*list = append(*list, value)
	return p.Policy, true
}

// remove returns a copy of o without value under key (nil when nothing
// is left of the override).
func remove(o *security.Policy, key, value string) *security.Policy {
	if o == nil {
		return nil
	}
	p := clonePolicy(o)
	list := p.field(key, security.Policy{})
	out := (*list)[:0]
	for _, s := range *list {
		if s != value {
			out = append(out, s)
		}
	}
	*list = out
	return p.Policy
}

type policy struct{ *security.Policy }

// clonePolicy copies o through its JSON form, which is how it is stored:
// every field, and no list shared with o.
func clonePolicy(o *security.Policy) policy {
	p := &security.Policy{}
	if o != nil {
		b, _ := json.Marshal(o)
		json.Unmarshal(b, p)
	}
	return policy{p}
}

// field is the list key names, made where it is missing (allowedDomains
// from global's, since a group's own list replaces the global one).
func (p policy) field(key string, global security.Policy) *[]string {
	switch key {
	case KeyAllowRead:
		return &p.AllowRead
	case KeyAllowWrite:
		return &p.AllowWrite
	}
	if p.Network == nil {
		p.Network = &security.Network{}
	}
	if p.Network.AllowedDomains == nil {
		if global.Network != nil {
			p.Network.AllowedDomains = cloneList(global.Network.AllowedDomains)
		}
		if p.Network.AllowedDomains == nil {
			p.Network.AllowedDomains = []string{}
		}
	}
	return &p.Network.AllowedDomains
}

func cloneList(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}
