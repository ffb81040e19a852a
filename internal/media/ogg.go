package media

import (
	"bytes"
	"encoding/binary"
	"math"
)

// oggSeconds is the length of an Ogg Opus or Vorbis stream (a voice note
// posted without its length, as the local channel does): the granule
// position of its last page over the sample rate, less Opus's pre-skip.
// 0 when data is not such a stream.
func oggSeconds(data []byte) int {
	if !bytes.HasPrefix(data, []byte("OggS")) {
		return 0
	}
	head := data[:min(len(data), 4096)]
	var rate, skip uint64
	if i := bytes.Index(head, []byte("OpusHead")); i >= 0 && len(data) >= i+12 {
		rate, skip = 48000, uint64(binary.LittleEndian.Uint16(data[i+10:])) // Opus always counts at 48 kHz
	} else if i := bytes.Index(head, []byte("\x01vorbis")); i >= 0 && len(data) >= i+16 {
		rate = uint64(binary.LittleEndian.Uint32(data[i+12:]))
	}
	if rate == 0 {
		return 0
	}
	// Page by page from the start: the last complete page's granule
	// position counts the samples (a cut stream ends at its last whole page).
	var samples uint64
	for at := 0; len(data) >= at+27 && bytes.HasPrefix(data[at:], []byte("OggS")); {
		n := int(data[at+26])
		if len(data) < at+27+n {
			break
		}
		next := at + 27 + n
		for _, s := range data[at+27 : at+27+n] {
			next += int(s)
		}
		if next > len(data) {
			break
		}
		if g := binary.LittleEndian.Uint64(data[at+6:]); g != math.MaxUint64 { // MaxUint64: no packet ends here
			samples = g
		}
		at = next
	}
	if samples <= skip {
		return 0
	}
	return max(1, int(math.Round(float64(samples-skip)/float64(rate))))
}
