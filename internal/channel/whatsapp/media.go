package whatsapp

import (
	"context"
	"fmt"
	"os"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// fileMessage uploads f (encrypted by whatsmeow) to WhatsApp's media
// servers and returns the message that shows it with caption: a picture
// for the image types every WhatsApp client shows inline (JPEG, PNG), a
// document, under its name, for anything else.
func fileMessage(ctx context.Context, up media, f *channel.Attachment, caption string) (*waE2E.Message, error) {
	if up == nil {
		return nil, fmt.Errorf("upload %s: %w: %w", f.Name, ErrNotConnected, channel.ErrUnavailable)
	}
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("the copy of %s to send is gone (%v): %w", f.Name, err, channel.ErrUndeliverable)
	}
	image := f.MIME == "image/jpeg" || f.MIME == "image/png"
	kind := whatsmeow.MediaDocument
	if image {
		kind = whatsmeow.MediaImage
	}
	u, err := up.Upload(ctx, data, kind)
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", f.Name, classifySendError(err))
	}
	if image {
		return &waE2E.Message{ImageMessage: &waE2E.ImageMessage{
			Caption: proto.String(caption), Mimetype: proto.String(f.MIME),
			URL: proto.String(u.URL), DirectPath: proto.String(u.DirectPath), MediaKey: u.MediaKey,
			FileEncSHA256: u.FileEncSHA256, FileSHA256: u.FileSHA256, FileLength: proto.Uint64(u.FileLength),
		}}, nil
	}
	return &waE2E.Message{DocumentMessage: &waE2E.DocumentMessage{
		Caption: proto.String(caption), Mimetype: proto.String(f.MIME),
		Title: proto.String(f.Name), FileName: proto.String(f.Name),
		URL: proto.String(u.URL), DirectPath: proto.String(u.DirectPath), MediaKey: u.MediaKey,
		FileEncSHA256: u.FileEncSHA256, FileSHA256: u.FileSHA256, FileLength: proto.Uint64(u.FileLength),
	}}, nil
}
