package groups

import (
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Who calls a group's assistant, and who may start its conversation afresh.
func TestCalls(t *testing.T) {
	main := Group{IsMain: true}
	open := Group{Trigger: "@Andy", RequiresTrigger: false}
	family := Group{Trigger: "@Andy", RequiresTrigger: true, Security: &security.Policy{Senders: []string{"+49170"}}}
	for _, tc := range []struct {
		name         string
		g            Group
		sender, text string
		calls, reset bool
	}{
		{"main, anything", main, "x@s.whatsapp.net", "hello", true, true},
		{"no trigger needed", open, "x@s.whatsapp.net", "hello", true, true},
		{"allowed sender with the trigger", family, "49170@s.whatsapp.net", "@andy, dinner?", true, true},
		{"allowed sender without it", family, "49170@s.whatsapp.net", "dinner?", false, true},
		{"trigger inside a word", family, "49170@s.whatsapp.net", "@Andyx dinner?", false, true},
		{"another sender with the trigger", family, "49666@s.whatsapp.net", "@Andy dinner?", false, false},
	} {
		if got := tc.g.Calls(tc.sender, tc.text); got != tc.calls {
			t.Errorf("%s: Calls = %v, want %v", tc.name, got, tc.calls)
		}
		if got := tc.g.MayReset(tc.sender); got != tc.reset {
			t.Errorf("%s: MayReset = %v, want %v", tc.name, got, tc.reset)
		}
	}
}
