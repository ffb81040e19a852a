package protocol

import (
	"strings"
	"testing"
	"time"
)

func TestSearchRequest(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	for _, tt := range []struct {
		r            Request
		words        string
		limit        int
		since, until string
		err          string
	}{
		{r: Request{Query: "plumber"}, words: "plumber", limit: 20},
		{r: Request{Query: "  the   plumber  ", Limit: "100"}, words: "the plumber", limit: 100},
		{r: Request{Query: `"quoted" OR * -`}, words: `"quoted" OR`, limit: 20},
		{r: Request{Query: "x", Since: "2026-03-01", Until: "2026-03-31"}, words: "x", limit: 20,
			since: "2026-03-01T00:00:00+01:00", until: "2026-04-01T00:00:00+01:00"},
		{r: Request{Query: "x", Since: "2026-03-01T10:00:00Z"}, words: "x", limit: 20, since: "2026-03-01T10:00:00Z"},
		{r: Request{Query: "jonas\x00 plumb\x00er \x01x y\x1b[0m"}, words: "jonas plumb er x y [0m", limit: 20},
		{r: Request{Query: `"`}, err: "give one or more words"},
		{r: Request{Query: "\x00\x01\x1b"}, err: "give one or more words"},
		{r: Request{Query: "* - ()"}, err: "give one or more words"},
		{r: Request{Query: "x", Limit: "0"}, err: "limit"},
		{r: Request{Query: "x", Limit: "101"}, err: "limit"},
		{r: Request{Query: "x", Limit: "+5"}, err: "limit"},
		{r: Request{Query: "x", Limit: "ten"}, err: "limit"},
		{r: Request{Query: "x", Since: "March"}, err: "since"},
		{r: Request{Query: "x", Until: "2026-13-01"}, err: "until"},
		{r: Request{Query: "x", Since: "2026-03-02", Until: "2026-03-01"}, err: "not before"},
		{r: Request{Query: strings.Repeat("w ", 17)}, err: "at most 16 words"},
	} {
		s, err := tt.r.Search(loc)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: error %v, want one about %q", tt.r, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tt.r, err)
			continue
		}
		if got := strings.Join(s.Words, " "); got != tt.words || s.Limit != tt.limit {
			t.Errorf("%+v: words %q limit %d, want %q %d", tt.r, got, s.Limit, tt.words, tt.limit)
		}
		for _, c := range []struct {
			got  time.Time
			want string
		}{{s.Since, tt.since}, {s.Until, tt.until}} {
			if c.want == "" {
				if !c.got.IsZero() {
					t.Errorf("%+v: a bound %v, want none", tt.r, c.got)
				}
				continue
			}
			want, _ := time.Parse(time.RFC3339, c.want)
			if !c.got.Equal(want) {
				t.Errorf("%+v: bound %v, want %v", tt.r, c.got, want)
			}
		}
	}
	if got := MatchExpr([]string{"plumber", `say"what`, "OR"}); got != `"plumber" "say""what" "OR"` {
		t.Errorf("MatchExpr = %s", got)
	}
}

func TestDecodeSearchHistory(t *testing.T) {
	r, err := DecodeRequest([]byte(`{"type":"search_history","query":"plumber","chatJid":"local:x","limit":"5","token":"t"}`), nil)
	if err != nil || r.Query != "plumber" || r.Limit != "5" || r.ChatJID != "local:x" {
		t.Errorf("decode: %+v, %v", r, err)
	}
	if _, err := DecodeRequest([]byte(`{"type":"search_history","query":"plumber","limit":5,"token":"t"}`), nil); err == nil {
		t.Error("a number for limit was accepted; IPC fields are strings")
	}
	if _, err := DecodeRequest([]byte(`{"type":"search_history","token":"t"}`), nil); err == nil {
		t.Error("a search without query was accepted")
	}
	if Dir(TypeSearchHistory) != "tasks" {
		t.Errorf("search_history belongs in %s/", Dir(TypeSearchHistory))
	}
}
