package router

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// MaxImageBytes caps a downloaded image: the Messages API refuses larger
// ones, so bigger files would only fill the disk.
const MaxImageBytes = 5 << 20

// imageTypes are the image formats the model reads, with their extension.
var imageTypes = map[string]string{"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp"}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// saveImage downloads m's image into <group folder>/media/ and returns the
// text to store for the message: "[image media/ID.jpg]" and the caption.
// The agent runner turns that marker into an image block for the model.
// What cannot be saved (too big, unsupported, download failed) is said in
// the text instead, so the message still reaches the agent.
func (r *Router) saveImage(ctx context.Context, g groups.Group, m channel.Message) string {
	caption := strings.TrimSpace(m.Text)
	with := func(s string) string { return strings.TrimSpace(s + " " + caption) }
	ext, ok := imageTypes[strings.TrimSpace(strings.Split(m.Image.MimeType, ";")[0])]
	if !ok {
		return with(fmt.Sprintf("[image of type %q, which the assistant cannot view]", m.Image.MimeType))
	}
	tooBig := with(fmt.Sprintf("[image not downloaded: larger than %d MB]", MaxImageBytes>>20))
	if m.Image.Size > MaxImageBytes {
		return tooBig
	}
	data, err := m.Image.Fetch(ctx)
	if err != nil {
		r.Log.Warn().Err(err).Str("group", g.Folder).Str("id", m.ID).Msg("image download failed")
		return with("[image could not be downloaded: " + err.Error() + "]")
	}
	if len(data) > MaxImageBytes {
		return tooBig
	}
	name := layout.MediaDir + "/" + unsafeName.ReplaceAllString(m.ID, "_") + ext
	path := filepath.Join(r.Config().Layout().Group(g.Folder), filepath.FromSlash(name))
	err = os.MkdirAll(filepath.Dir(path), 0o755)
	if err == nil {
		err = atomicfile.Write(path, data, 0o644)
	}
	if err != nil {
		r.Log.Error().Err(err).Str("group", g.Folder).Msg("saving an image failed")
		return with("[image could not be saved: " + err.Error() + "]")
	}
	return with("[image " + name + "]")
}
