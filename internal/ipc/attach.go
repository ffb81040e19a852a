package ipc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// MaxAttachment is the largest file a message may carry: 16 MiB. WhatsApp
// itself takes larger documents (its limits are in the hundreds of MiB),
// but the daemon holds a copy of each file until it is sent and the
// channel reads it whole, so the cap keeps a burst of sends from filling
// the disk or the daemon's memory.
const MaxAttachment = 16 << 20

// RunView is what a group's runs can read, which bounds what the daemon
// reads for the group: it never lends a group its own (root's) reach.
type RunView struct {
	// Confined: the group's runs are sandboxed (every group but main).
	Confined bool
	// User is the host user the runs are: a file is opened as it.
	User sandbox.User
	// DenyRead is the group's resolved denyRead.
	DenyRead []string
}

// stageFile decides the file a message names: file (relative to groupDir,
// or absolute inside it) must be a regular file of at most MaxAttachment
// inside the sending group's own folder, reached without leaving it by
// `..` or a symlink, and, for a confined group, one its run could read:
// no protected name, nothing denyRead cuts out, opened as the run's user.
// Its bytes are copied at once into dir, the daemon's own, so that what
// is sent is what was checked, whatever the agent does to the file
// afterwards. A Refusal says why the file may not be sent; an error is
// the daemon's own trouble (the copy failed), tried again later.
func stageFile(groupDir, file, dir string, view RunView) (channel.Attachment, *Refusal, error) {
	refuse := func(format string, args ...any) (channel.Attachment, *Refusal, error) {
		return channel.Attachment{}, &Refusal{Target: file, Reason: fmt.Sprintf(format, args...)}, nil
	}
	// Reading outside its own folder is what a group may not do: the
	// attempt is a filesystem violation, alerted like the sandbox's.
	outside := func(how string) (channel.Attachment, *Refusal, error) {
		return channel.Attachment{}, &Refusal{Target: file, Alert: true, Kind: security.KindFilesystem,
			Reason: fmt.Sprintf("file %q %s the group's folder; send only files from your own folder", file, how)}, nil
	}
	rel := file
	if filepath.IsAbs(file) {
		r, err := filepath.Rel(groupDir, filepath.Clean(file))
		if err != nil || !filepath.IsLocal(r) {
			return outside("is outside")
		}
		rel = r
	}
	if !filepath.IsLocal(rel) {
		return outside("is outside")
	}
	// What the run could not read is a filesystem violation too.
	hidden := func(why string) (channel.Attachment, *Refusal, error) {
		return channel.Attachment{}, &Refusal{Target: file, Alert: true, Kind: security.KindFilesystem,
			Reason: fmt.Sprintf("file %q %s; send only files your runs can read", file, why)}, nil
	}
	if view.Confined {
		if why := unreadable(groupDir, rel, view); why != "" {
			return hidden(why)
		}
	}
	// The os.Root opens each component below groupDir without following
	// a symlink out of it, in the same walk that opens the file: a link
	// swapped in after any check of ours still cannot lead out.
	root, err := os.OpenRoot(groupDir)
	if err != nil {
		return refuse("the group's folder cannot be opened: %v", err)
	}
	defer root.Close()
	// Opened as the run's user (sandbox.OpenAs), non-blocking: a FIFO
	// must not hang the watcher (it is refused below).
	user := sandbox.User{UID: os.Geteuid(), GID: os.Getegid()}
	if view.Confined {
		user = view.User
	}
	f, err := sandbox.OpenAs(root, rel, user)
	switch {
	case err != nil && escapes(err):
		return outside("leads (through a symlink or ..) outside")
	case errors.Is(err, fs.ErrPermission):
		return hidden(fmt.Sprintf("may not be read by the group's runs (uid %d)", user.UID))
	case errors.Is(err, fs.ErrNotExist):
		return refuse("no file %q in the group's folder; give a path relative to it", file)
	case err != nil:
		return refuse("file %q cannot be opened: %v", file, err)
	}
	defer f.Close()
	if view.Confined {
		// A link inside the folder may lead to a file the run cannot see.
		real, err := sandbox.RealPath(f)
		if err != nil {
			return refuse("file %q cannot be read: %v", file, err)
		}
		top, _ := filepath.EvalSymlinks(groupDir)
		r, err := filepath.Rel(top, real)
		if err != nil || !filepath.IsLocal(r) {
			return outside("leads outside")
		}
		if why := unreadable(top, r, view); why != "" {
			return hidden(why)
		}
	}
	fi, err := f.Stat()
	if err != nil {
		return refuse("file %q cannot be read: %v", file, err)
	}
	if !fi.Mode().IsRegular() {
		return refuse("file %q is not a regular file (%s)", file, groupfs.Kind(fi.Mode()))
	}
	if fi.Size() > MaxAttachment {
		return refuse("file %q is %d bytes, over the %d MiB limit", file, fi.Size(), MaxAttachment>>20)
	}
	path, head, over, err := copyInto(dir, f)
	if err != nil {
		return channel.Attachment{}, nil, err
	}
	if over {
		return refuse("file %q grew over the %d MiB limit while it was read", file, MaxAttachment>>20)
	}
	name := filepath.Base(rel)
	return channel.Attachment{Name: name, MIME: mimeOf(name, head), Path: path}, nil, nil
}

// unreadable says why a confined run could not read rel in its folder
// groupDir, or "": a protected name (only the owner's; the daemon keeps
// .mcp.json and .envrc from the run), or a path denyRead cuts out.
func unreadable(groupDir, rel string, view RunView) string {
	if name := sandbox.ProtectedName(rel); name != "" {
		return fmt.Sprintf("is protected (%s is the owner's)", name)
	}
	if rule := sandbox.DeniedBy(filepath.Join(groupDir, rel), groupDir, view.DenyRead); rule != "" {
		return fmt.Sprintf("is hidden from the group by denyRead %q", rule)
	}
	return ""
}

// escapes tells whether err is os.Root's refusal of a path that leads out
// of it. The standard library does not export that error, only its text.
func escapes(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// copyInto copies at most MaxAttachment bytes of f into a new file of dir
// (made 0700) and syncs it, so the copy is on disk before the decision
// that refers to it commits; head is its first bytes, for sniffing. over
// says f had more; nothing is kept then.
func copyInto(dir string, f io.Reader) (path string, head []byte, over bool, err error) {
	if err := mkdirPrivate(dir); err != nil {
		return "", nil, false, err
	}
	out, err := os.CreateTemp(dir, "file-*")
	if err != nil {
		return "", nil, false, fmt.Errorf("copy a file to send: %w", err)
	}
	head = make([]byte, 512)
	n, rerr := io.ReadFull(f, head)
	head = head[:n]
	if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
		rerr = nil
	}
	_, werr := out.Write(head)
	var copied int64
	if rerr == nil && werr == nil && n == len(head) {
		copied, err = io.Copy(out, io.LimitReader(f, MaxAttachment+1-int64(n)))
		werr = err
	}
	if serr := out.Sync(); werr == nil {
		werr = serr
	}
	if cerr := out.Close(); werr == nil {
		werr = cerr
	}
	over = int64(n)+copied > MaxAttachment
	if err := errors.Join(rerr, werr); err != nil || over {
		os.Remove(out.Name())
		if err != nil {
			return "", nil, false, fmt.Errorf("copy a file to send into %s: %w", dir, err)
		}
		return "", nil, true, nil
	}
	return out.Name(), head, false, nil
}

// mimeOf names a file's type: by its content when that is an image (an
// extension alone must not make a file an image WhatsApp tries to show),
// else by its extension, else by its content (text or octet-stream).
func mimeOf(name string, head []byte) string {
	sniffed := http.DetectContentType(head)
	if strings.HasPrefix(sniffed, "image/") {
		return sniffed
	}
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" && !strings.HasPrefix(t, "image/") {
		return t
	}
	return sniffed
}
