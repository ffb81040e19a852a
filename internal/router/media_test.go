package router

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// A received photo is saved in the group's media/ folder and marked in the
// stored text; what cannot be saved is said in the text, never dropped.
func TestSaveImage(t *testing.T) {
	dir := t.TempDir()
	r := &Router{Config: func() *config.Config { return &config.Config{GroupsDir: dir} }, Log: zerolog.Nop()}
	g := groups.Group{Folder: "family"}
	jpeg := []byte("\xff\xd8\xff\xe0 not really a jpeg")
	fetches := 0
	img := func(mime string, size int64, data []byte, err error) *channel.Image {
		return &channel.Image{MimeType: mime, Size: size, Fetch: func(context.Context) ([]byte, error) { fetches++; return data, err }}
	}
	for _, tc := range []struct {
		name    string
		m       channel.Message
		want    string
		fetched int
	}{
		{"saved", channel.Message{ID: "3EB0AB", Text: "our kitchen", Image: img("image/jpeg", int64(len(jpeg)), jpeg, nil)}, "[image media/3EB0AB.jpg] our kitchen", 1},
		{"odd id", channel.Message{ID: "../x", Image: img("image/png", 3, []byte("png"), nil)}, "[image media/___x.png]", 1},
		{"announced too big", channel.Message{ID: "B", Text: "huge", Image: img("image/jpeg", MaxImageBytes+1, nil, nil)}, "[image not downloaded: larger than 5 MB] huge", 0},
		{"too big after all", channel.Message{ID: "C", Image: img("image/jpeg", 10, make([]byte, MaxImageBytes+1), nil)}, "[image not downloaded: larger than 5 MB]", 1},
		{"unsupported", channel.Message{ID: "D", Image: img("image/heic", 10, nil, nil)}, `[image of type "image/heic", which the assistant cannot view]`, 0},
		{"download failed", channel.Message{ID: "E", Text: "x", Image: img("image/jpeg", 10, nil, errors.New("media expired (410)"))}, "[image could not be downloaded: media expired (410)] x", 1},
	} {
		fetches = 0
		if got := r.saveImage(context.Background(), g, tc.m); got != tc.want || fetches != tc.fetched {
			t.Errorf("%s: text %q after %d fetches, want %q after %d", tc.name, got, fetches, tc.want, tc.fetched)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "family", "media", "3EB0AB.jpg"))
	if err != nil || !bytes.Equal(got, jpeg) {
		t.Errorf("saved file = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.png")); err == nil {
		t.Error("a message id escaped the media folder")
	}
}
