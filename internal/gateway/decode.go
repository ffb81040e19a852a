package gateway

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// The relay reads each answer's usage from its bytes, so it asks the
// upstream for them as they are (Accept-Encoding: identity) whatever the
// agent accepts: the SDK asks for "gzip, deflate, br, zstd", and the real
// API compresses its event streams when asked. An upstream may compress
// all the same (a gateway in between that ignores identity): such an
// answer is decoded here as it streams and goes on to the agent decoded,
// without its Content-Encoding, so the meter and the agent read the same
// bytes and every client can take them.

// identity is the only encoding the relay asks upstreams for.
const identity = "identity"

// decoders open a reader of a compressed body, by Content-Encoding.
var decoders = map[string]func(io.Reader) (io.Reader, error){
	"gzip":   func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) },
	"x-gzip": func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) },
	"br":     func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil },
	"zstd": func(r io.Reader) (io.Reader, error) {
		// One block at a time, in the reader's goroutine: a decoder of its
		// own would read ahead and hold back what already came.
		return zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
	},
	"deflate": inflate,
}

// inflate reads "deflate" as HTTP means it (zlib, RFC 1950) and, as
// browsers do, as the raw deflate some servers send instead.
func inflate(r io.Reader) (io.Reader, error) {
	br := bufio.NewReader(r)
	if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint(h[0])<<8|uint(h[1]))%31 == 0 {
		return zlib.NewReader(br)
	}
	return flate.NewReader(br), nil
}

// decode replaces resp's body by its decoded stream when the upstream
// compressed it, and drops the headers that described the compressed
// bytes. It reports an encoding the relay cannot read ("" when there is
// none): that answer goes on as it came, and its usage cannot be counted.
func decode(resp *http.Response) (unknown string) {
	enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if enc == "" || enc == identity {
		return ""
	}
	open, ok := decoders[enc]
	if !ok {
		return enc
	}
	resp.Body = &decodedBody{raw: resp.Body, open: open}
	resp.Header.Del("Content-Encoding")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.Uncompressed = true
	return ""
}

// decodedBody opens its decoder on the first read, not before: opening
// one reads the stream's header, which must wait for the upstream within
// the relay's timeouts, as every other read does.
type decodedBody struct {
	raw  io.ReadCloser
	open func(io.Reader) (io.Reader, error)
	r    io.Reader
	err  error // the decoder could not be opened
}

func (d *decodedBody) Read(p []byte) (int, error) {
	if d.r == nil && d.err == nil {
		d.r, d.err = d.open(d.raw)
	}
	if d.err != nil {
		return 0, d.err
	}
	return d.r.Read(p)
}

func (d *decodedBody) Close() error {
	switch c := d.r.(type) {
	case io.Closer:
		c.Close()
	case interface{ Close() }: // zstd's decoder frees its buffers
		c.Close()
	}
	return d.raw.Close()
}
