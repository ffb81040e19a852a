package local

import (
	"context"
	"encoding/base64"
	"mime"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// message checks a POST /messages body and makes it the message a chat
// would deliver; problem says what is wrong with it, and how to fix it.
func (in Message) message() (m channel.Message, problem string) {
	if in.Sender == "" {
		in.Sender = "local-user"
	}
	if in.SenderName == "" {
		in.SenderName = in.Sender
	}
	m = channel.Message{ChatJID: in.ChatJID, SenderJID: in.Sender, SenderName: in.SenderName, Text: in.Text,
		QuotedID: in.QuotedID, QuotedSender: in.QuotedSender, QuotedText: in.QuotedText}
	switch {
	case in.ReactTo != "" || in.Emoji != "":
		if in.ReactTo == "" || strings.TrimSpace(in.Emoji) == "" || in.Text != "" || in.Media != nil {
			return m, `a reaction is "reactTo" (the id of a message of the chat) with "emoji", and no text or media`
		}
		m.ReactTo, m.Text = in.ReactTo, in.Emoji
	case in.Media != nil:
		data, err := base64.StdEncoding.DecodeString(in.Media.DataBase64)
		if err != nil {
			return m, "media.dataBase64 is not standard base64: " + err.Error()
		}
		typ, _, err := mime.ParseMediaType(in.Media.Type)
		if err != nil {
			return m, `media.type must be a MIME type such as "image/jpeg" or "audio/ogg; codecs=opus"`
		}
		m.Media = &channel.Media{Kind: kindOf(typ, in.Media.Voice), MimeType: in.Media.Type, Name: in.Media.Name, Size: int64(len(data)),
			Fetch: func(context.Context) ([]byte, error) { return data, nil }}
	case strings.TrimSpace(in.Text) == "":
		return m, "text is empty"
	}
	return m, ""
}

// kindOf is what WhatsApp would call a file of MIME type typ.
func kindOf(typ string, voice bool) string {
	switch major, _, _ := strings.Cut(typ, "/"); {
	case voice:
		return channel.MediaVoice
	case major == "image":
		return channel.MediaImage
	case major == "audio":
		return channel.MediaAudio
	case major == "video":
		return channel.MediaVideo
	}
	return channel.MediaDocument
}
