package security

import "testing"

// Who may call an agent (senders) and answer alerts (alerts.approvers):
// WhatsApp numbers with or without "+", full JIDs, and Telegram users as
// tg:<user id>, which must match exactly (a chat id is not a user id).
func TestSenderAllowed(t *testing.T) {
	list := []string{"+4915112345678", "tg:424242", "bob@local"}
	for _, tc := range []struct {
		sender string
		want   bool
	}{
		{"4915112345678@s.whatsapp.net", true},
		{"4915112345679@s.whatsapp.net", false},
		{"tg:424242", true},
		{"TG:424242", true},
		{"tg:4242420", false},
		{"tg:-424242", false},
		{"bob@local", true},
	} {
		if got := SenderAllowed(list, tc.sender); got != tc.want {
			t.Errorf("SenderAllowed(%q) = %v, want %v", tc.sender, got, tc.want)
		}
	}
}
