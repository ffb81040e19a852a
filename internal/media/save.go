package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/transcribe"
)

// Files people send are saved as <group folder>/media/<message id><ext>
// and named in the prompt by a marker: kind, name, length, size and path,
// e.g. "[document report.pdf, 1.2 MB, media/3EB0.pdf]". What cannot be
// saved (too big, download failed) is said in the marker instead, so the
// message still reaches the agent.

// MaxImageBytes is the largest image the model is shown: the Messages API
// refuses larger ones. A larger image is still saved, as a file.
const MaxImageBytes = 5 << 20

// viewable are the image formats the model reads, with their extension;
// the agent runner sends "[image …, media/ID.ext]" of these as images.
var viewable = map[string]string{"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif", "image/webp": ".webp"}

// extensions WhatsApp's own types get (mime's table lacks some, or gives
// odd ones such as .oga).
var extensions = map[string]string{
	"audio/ogg": ".ogg", "audio/mpeg": ".mp3", "audio/mp4": ".m4a", "audio/aac": ".aac", "audio/amr": ".amr", "audio/wav": ".wav",
	"video/mp4": ".mp4", "video/3gpp": ".3gp", "video/quicktime": ".mov", "application/pdf": ".pdf", "text/plain": ".txt",
	"image/heic": ".heic",
}

var (
	unsafeID   = regexp.MustCompile(`[^A-Za-z0-9_-]`)
	cleanExt   = regexp.MustCompile(`^\.[A-Za-z0-9]{1,8}$`)
	unsafeName = regexp.MustCompile(`[^\p{L}\p{N} ._()+-]`)
)

// saved is a file kept for a message.
type saved struct {
	marker string // without its closing "]", so a transcript's note can join it
	rel    string // media/<id><ext>, relative to the group's folder ("" if not saved)
	kind   string
	copy   transcribe.Copy // a voice note's private copy for the transcriber (Path "" if none)
}

// text is the finished marker, with note (e.g. a transcript) after it.
func (s saved) text(note string) string {
	return strings.TrimSpace(s.marker + "] " + note)
}

// saveMedia downloads m's file into the group's media/ and returns its
// marker; rel is empty when the file was not saved.
func (in *Inbound) save(ctx context.Context, g groups.Group, m channel.Message) saved {
	md := m.Media
	kind := md.Kind
	if kind == "" {
		kind = channel.MediaDocument
	}
	typ, _, _ := mime.ParseMediaType(md.MimeType)
	name := displayName(md.Name)
	head, sep := "["+kind, " "
	if name != "" {
		head, sep = head+" "+name, ", "
	}
	s := saved{marker: head, kind: kind}
	limit := in.Config().Media.MaxBytes
	tooBig := func(e *channel.TooBigError) saved {
		s.marker = head + ": not downloaded"
		if e.Size > 0 {
			s.marker = head + sep + humanSize(e.Size) + ": not downloaded"
		}
		s.marker += fmt.Sprintf(", larger than the %s limit (%s)", humanSize(e.Limit), e.Why)
		return s
	}
	if md.Size > int64(limit) {
		return tooBig(&channel.TooBigError{Size: md.Size, Limit: int64(limit), Why: "media.maxBytes"})
	}
	data, err := md.Fetch(ctx)
	if tb := (*channel.TooBigError)(nil); errors.As(err, &tb) {
		in.Log.Warn().Err(err).Str("group", g.Folder).Str("id", m.ID).Str("kind", kind).Msg("media not downloaded: too big")
		return tooBig(tb)
	}
	if err != nil {
		in.Log.Warn().Err(err).Str("group", g.Folder).Str("id", m.ID).Str("kind", kind).Msg("media download failed")
		s.marker = head + ": could not be downloaded (" + err.Error() + ")"
		return s
	}
	if len(data) > limit {
		return tooBig(&channel.TooBigError{Size: int64(len(data)), Limit: int64(limit), Why: "media.maxBytes"})
	}
	rel := layout.MediaDir + "/" + unsafeID.ReplaceAllString(m.ID, "_") + extension(typ, md.Name)
	if err := in.write(ctx, g, path.Base(rel), data); err != nil {
		in.Log.Error().Err(err).Str("group", g.Folder).Str("id", m.ID).Msg("saving a received file failed")
		s.marker = head + ": could not be saved (" + err.Error() + ")"
		return s
	}
	secs := md.Seconds
	if secs == 0 && typ == "audio/ogg" {
		secs = oggSeconds(data)
	}
	var parts []string
	if secs > 0 {
		parts = append(parts, fmt.Sprintf("%d:%02d", secs/60, secs%60))
	}
	if kind != channel.MediaVoice || secs == 0 {
		parts = append(parts, humanSize(int64(len(data))))
	}
	parts = append(parts, rel)
	s.marker, s.rel = head+sep+strings.Join(parts, ", "), rel
	if (kind == channel.MediaVoice || kind == channel.MediaAudio) && transcribe.Configured(in.Config().Media.Transcribe) {
		// The transcriber gets these very bytes, kept where no group
		// writes: the copy in media/ may be swapped for a link at once.
		cfg := in.Config()
		if s.copy, err = transcribe.Keep(cfg.Layout().Transcribing(), cfg.Agent.RunAs.User(), path.Base(rel), data); err != nil {
			in.Log.Error().Err(err).Str("group", g.Folder).Str("id", m.ID).Msg("keep a voice note's copy to transcribe")
		}
	}
	if kind == channel.MediaImage {
		if _, ok := viewable[typ]; !ok {
			s.marker += ", a format the model cannot view"
		} else if len(data) > MaxImageBytes {
			s.marker += fmt.Sprintf(", too large for the model to view (over %s)", humanSize(MaxImageBytes))
		}
	}
	return s
}

// writeMedia writes data as media/name of g's folder. The folder is the
// group's to write, so it goes through groupfs: whatever the group put
// where media/ belongs (a link above all) is removed without being
// followed, reported as a filesystem violation, and replaced by a real
// directory; a temp file beside the name, synced and renamed over it,
// replaces a link planted under the name itself. The file is readable by
// a confined run whatever the daemon's umask.
func (in *Inbound) write(ctx context.Context, g groups.Group, name string, data []byte) error {
	folder, err := groupfs.Open(in.Config().Layout().Group(g.Folder), g.Folder, 0o755, in.Reporter)
	if err != nil {
		return err
	}
	defer folder.Close()
	media, err := folder.Sub(ctx, layout.MediaDir, 0o755)
	if err != nil {
		return err
	}
	defer media.Close()
	return atomicfile.CopyIn(media.Root(), name, bytes.NewReader(data), 0o644)
}

// extension is the saved file's: the sender's own when it looks like one,
// else the MIME type's, else .bin.
func extension(typ, name string) string {
	if e, ok := viewable[typ]; ok {
		return e
	}
	if e, ok := extensions[typ]; ok {
		return e
	}
	if e := strings.ToLower(filepath.Ext(name)); cleanExt.MatchString(e) {
		return e
	}
	if exts, _ := mime.ExtensionsByType(typ); len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}

// displayName is the sender's file name as the prompt shows it: its base
// name, with anything but letters, digits and a few marks replaced, at
// most 80 runes.
func displayName(name string) string {
	name = strings.TrimSpace(unsafeName.ReplaceAllString(path.Base(strings.ReplaceAll(name, `\`, "/")), "_"))
	if name == "." || name == "_" {
		return ""
	}
	if r := []rune(name); len(r) > 80 {
		name = string(r[:80])
	}
	return name
}

// humanSize is n bytes as "512 bytes", "12 KB" or "1.2 MB" (units of 1024).
func humanSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
}
