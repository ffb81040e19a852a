package mockapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
)

func TestNegotiate(t *testing.T) {
	for accept, want := range map[string]string{
		"gzip, deflate, br, zstd": "gzip", // the SDK's
		"":                        "",
		"identity":                "",
		"br":                      "br",
		"gzip;q=0, br;q=0.5":      "br",
		"*":                       "gzip",
		"*;q=0":                   "",
		"zstd, *;q=0":             "zstd",
		"DEFLATE":                 "deflate",
	} {
		if got := negotiate([]string{accept}); got != want {
			t.Errorf("Accept-Encoding %q: %q, want %q", accept, got, want)
		}
	}
}

// Like the real API, the mock compresses what the request allows and
// sends it chunked; set unkind, it compresses what the request refused.
func TestCompressesLikeTheAPI(t *testing.T) {
	s := New(t)
	ask := func(accept string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", s.URL+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Accept-Encoding", accept) // set by hand: Go's client leaves the body as it came
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, b := ask("gzip, deflate, br, zstd")
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil || resp.Header.Get("Content-Encoding") != "gzip" || resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 {
		t.Fatalf("the SDK's request: %v %v, chunked %v, %v", resp.Header, resp.ContentLength, resp.TransferEncoding, err)
	}
	if plain, _ := io.ReadAll(zr); !strings.Contains(string(plain), "event: message_stop") {
		t.Errorf("the gzip answer reads %q", plain)
	}
	if resp, b := ask("identity"); resp.Header.Get("Content-Encoding") != "" || !strings.Contains(string(b), "message_stop") {
		t.Errorf("asked for identity: %v %q", resp.Header, b)
	}
	s.SetEncoding("br")
	resp, b = ask("identity")
	plain, err := io.ReadAll(brotli.NewReader(bytes.NewReader(b)))
	if resp.Header.Get("Content-Encoding") != "br" || err != nil || !strings.Contains(string(plain), "message_stop") {
		t.Errorf("unkind: %v, %q, %v", resp.Header, plain, err)
	}
	if log := s.Log(); log[0].Encoding != "gzip" || log[1].Encoding != "" || log[2].Encoding != "br" {
		t.Errorf("the log says the answers were encoded %q, %q, %q", log[0].Encoding, log[1].Encoding, log[2].Encoding)
	}
}
