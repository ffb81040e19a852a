package media

import (
	"encoding/binary"
	"testing"
)

// oggPage is one Ogg page holding payload (under 256 bytes) as one packet.
func oggPage(granule uint64, payload []byte) []byte {
	p := []byte("OggS\x00\x00")
	p = binary.LittleEndian.AppendUint64(p, granule)
	p = append(p, make([]byte, 12)...) // serial, sequence, checksum
	p = append(p, 1, byte(len(payload)))
	return append(p, payload...)
}

// A voice note's length comes from its last page: 42 s of Opus after a
// pre-skip of 312 samples, 3 s of Vorbis at 44.1 kHz; anything else, or a
// cut stream, is unknown.
func TestOggSeconds(t *testing.T) {
	opusHead := append([]byte("OpusHead\x01\x01"), 0x38, 0x01, 0x80, 0xbb, 0, 0, 0, 0, 0) // pre-skip 312
	opus := append(oggPage(0, opusHead), oggPage(0, []byte("OpusTags"))...)
	opus = append(opus, oggPage(48000*20, []byte("audio OggS inside a packet"))...)
	opus = append(opus, oggPage(48000*42+312, []byte("last audio"))...)
	vorbisHead := append([]byte("\x01vorbis\x00\x00\x00\x00\x01"), 0x44, 0xac, 0, 0) // 44100 Hz
	vorbis := append(oggPage(0, vorbisHead), oggPage(44100*3, []byte("audio"))...)
	for name, tc := range map[string]struct {
		data []byte
		want int
	}{
		"opus":     {opus, 42},
		"vorbis":   {vorbis, 3},
		"cut":      {opus[:len(opus)-3], 20},
		"not ogg":  {[]byte("ID3 mp3"), 0},
		"no codec": {oggPage(48000, []byte("?")), 0},
		"empty":    {nil, 0},
	} {
		if got := oggSeconds(tc.data); got != tc.want {
			t.Errorf("%s: %d s, want %d", name, got, tc.want)
		}
	}
}
