package security

import "testing"

func TestAllowsSender(t *testing.T) {
	p := &Policy{Senders: []string{"+4915551234567", "alice", " bob@local "}}
	tests := []struct {
		pol  *Policy
		id   string
		want bool
	}{
		{nil, "anyone@s.whatsapp.net", true},
		{&Policy{}, "anyone@s.whatsapp.net", true},
		{p, "4915551234567@s.whatsapp.net", true}, // the number, '+' or not
		{p, "4915551234567", true},
		{p, "alice@local", true},
		{p, "bob@local", true},
		{p, "4915550000000@s.whatsapp.net", false},
		{p, "alice2@local", false},
		{p, "", false},
		{&Policy{Senders: []string{""}}, "", false}, // an empty entry names no one
	}
	for _, tc := range tests {
		if got := tc.pol.AllowsSender(tc.id); got != tc.want {
			t.Errorf("%v.AllowsSender(%q) = %v, want %v", tc.pol, tc.id, got, tc.want)
		}
	}
}
