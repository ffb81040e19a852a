package whatsapp

// What a message carries besides its text: the reply context, a file.

import (
	"context"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// contextInfo is the reply context of a text, image, video, document,
// audio or sticker message (nil when it has none).
func contextInfo(msg *waE2E.Message) *waE2E.ContextInfo {
	switch {
	case msg.GetExtendedTextMessage() != nil:
		return msg.GetExtendedTextMessage().GetContextInfo()
	case msg.GetImageMessage() != nil:
		return msg.GetImageMessage().GetContextInfo()
	case msg.GetVideoMessage() != nil:
		return msg.GetVideoMessage().GetContextInfo()
	case msg.GetDocumentMessage() != nil:
		return msg.GetDocumentMessage().GetContextInfo()
	case msg.GetAudioMessage() != nil:
		return msg.GetAudioMessage().GetContextInfo()
	case msg.GetStickerMessage() != nil:
		return msg.GetStickerMessage().GetContextInfo()
	}
	return nil
}

// mediaOf is the file msg carries, fetched through the connected client
// when the router asks for it; nil for a message without one.
func (c *Channel) mediaOf(msg *waE2E.Message) *channel.Media {
	var (
		d  whatsmeow.DownloadableMessage
		md channel.Media
	)
	switch {
	case msg.GetImageMessage() != nil:
		x := msg.GetImageMessage()
		d, md = x, channel.Media{Kind: channel.MediaImage, MimeType: x.GetMimetype(), Size: int64(x.GetFileLength())}
	case msg.GetAudioMessage() != nil:
		x := msg.GetAudioMessage()
		kind := channel.MediaAudio
		if x.GetPTT() {
			kind = channel.MediaVoice
		}
		d, md = x, channel.Media{Kind: kind, MimeType: x.GetMimetype(), Size: int64(x.GetFileLength()), Seconds: int(x.GetSeconds())}
	case msg.GetVideoMessage() != nil:
		x := msg.GetVideoMessage()
		d, md = x, channel.Media{Kind: channel.MediaVideo, MimeType: x.GetMimetype(), Size: int64(x.GetFileLength()), Seconds: int(x.GetSeconds())}
	case msg.GetDocumentMessage() != nil:
		x := msg.GetDocumentMessage()
		d, md = x, channel.Media{Kind: channel.MediaDocument, MimeType: x.GetMimetype(), Name: x.GetFileName(), Size: int64(x.GetFileLength())}
	case msg.GetStickerMessage() != nil:
		x := msg.GetStickerMessage()
		d, md = x, channel.Media{Kind: channel.MediaSticker, MimeType: x.GetMimetype(), Size: int64(x.GetFileLength())}
	default:
		return nil
	}
	md.Fetch = func(ctx context.Context) ([]byte, error) {
		cl := c.mediaClient()
		if cl == nil {
			return nil, ErrNotConnected
		}
		return cl.Download(ctx, d)
	}
	return &md
}

// describe names a quoted message without text by what it carried.
func describe(msg *waE2E.Message) string {
	switch {
	case msg.GetImageMessage() != nil:
		return "[image]"
	case msg.GetAudioMessage() != nil:
		if msg.GetAudioMessage().GetPTT() {
			return "[voice note]"
		}
		return "[audio]"
	case msg.GetVideoMessage() != nil:
		return "[video]"
	case msg.GetDocumentMessage() != nil:
		return "[document " + msg.GetDocumentMessage().GetFileName() + "]"
	case msg.GetStickerMessage() != nil:
		return "[sticker]"
	}
	return ""
}
