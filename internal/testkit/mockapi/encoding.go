package mockapi

import (
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// Encodings are the compressions the mock answers with, in the order it
// prefers them when a request accepts several: gzip first, as the real
// API answers the SDK's "gzip, deflate, br, zstd".
var Encodings = []string{"gzip", "br", "zstd", "deflate"}

// Identity is the encoding setting that never compresses.
const Identity = "identity"

// SetEncoding sets how answers are encoded from now on:
//
//   - "" (the default): as the real API does, compressed with the first of
//     Encodings the request's Accept-Encoding allows, else as they are;
//   - Identity: never compressed;
//   - "gzip", "br", "zstd" or "deflate": always that, whatever the request
//     accepts, even "identity": an unkind upstream (a gateway in front of
//     the API that ignores what the client asked for).
//
// Every compressed answer is sent chunked, each streamed event flushed
// through the compressor as it is written.
func (s *Server) SetEncoding(enc string) {
	if enc != "" && enc != Identity && !slices.Contains(Encodings, enc) {
		s.t.Fatalf("mockapi: no encoding %q (one of %v, %q or \"\")", enc, Encodings, Identity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.encoding = enc
}

// encodingFor is how the answer to a request with these headers is
// encoded ("" = as it is).
func (s *Server) encodingFor(h http.Header) string {
	s.mu.Lock()
	enc := s.encoding
	s.mu.Unlock()
	switch enc {
	case "":
		return negotiate(h.Values("Accept-Encoding"))
	case Identity:
		return ""
	}
	return enc
}

// negotiate picks the first of Encodings that Accept-Encoding allows (a
// listed name or "*" with q > 0), as RFC 9110 §12.5.3 reads it.
func negotiate(accept []string) string {
	q := map[string]float64{}
	for _, part := range strings.Split(strings.Join(accept, ","), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		v := 1.0
		if qs, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(qs, 64); err == nil {
				v = f
			}
		}
		if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
			q[name] = v
		}
	}
	for _, enc := range Encodings {
		v, ok := q[enc]
		if !ok {
			v, ok = q["*"]
		}
		if ok && v > 0 {
			return enc
		}
	}
	return ""
}

// Encoder compresses what is written to it; Flush sends on what it holds,
// so a flushed event reaches the client whole.
type Encoder interface {
	io.WriteCloser
	Flush() error
}

// NewEncoder compresses into w with enc, one of Encodings ("deflate" is
// zlib, as HTTP means it).
func NewEncoder(enc string, w io.Writer) Encoder {
	switch enc {
	case "gzip":
		return gzip.NewWriter(w)
	case "br":
		return brotli.NewWriter(w)
	case "zstd":
		z, err := zstd.NewWriter(w)
		if err != nil {
			panic(fmt.Sprintf("mockapi: zstd writer: %v", err)) // only for bad options
		}
		return z
	case "deflate":
		return zlib.NewWriter(w)
	}
	panic(fmt.Sprintf("mockapi: no encoding %q", enc))
}

// encodedWriter is a ResponseWriter that compresses its body.
type encodedWriter struct {
	http.ResponseWriter
	enc Encoder
}

// encoded wraps w to compress the answer with enc ("" = w as it is); done
// ends the compressed stream.
func encoded(w http.ResponseWriter, enc string) (http.ResponseWriter, func()) {
	if enc == "" {
		return w, func() {}
	}
	w.Header().Set("Content-Encoding", enc)
	w.Header().Add("Vary", "Accept-Encoding")
	ew := &encodedWriter{ResponseWriter: w, enc: NewEncoder(enc, w)}
	return ew, func() {
		ew.enc.Close()
		// Flushed before the handler returns, the answer goes chunked, as
		// the API's do, never with a Content-Length.
		w.(http.Flusher).Flush()
	}
}

func (e *encodedWriter) Write(p []byte) (int, error) { return e.enc.Write(p) }

func (e *encodedWriter) Flush() {
	e.enc.Flush()
	e.ResponseWriter.(http.Flusher).Flush()
}
