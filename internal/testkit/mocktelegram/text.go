package mocktelegram

import (
	"fmt"
	"html"
	"strings"
	"unicode/utf16"
)

// refuseText is the 400 Telegram answers a send whose text or caption it
// will not take, nil when it takes it.
func refuseText(req Request) *Failure {
	field, limit, tooLong := "text", MaxText, "Bad Request: message is too long"
	switch req.Method {
	case "sendMessage":
	case "sendPhoto", "sendDocument":
		field, limit, tooLong = "caption", MaxCaption, "Bad Request: message caption is too long"
	default:
		return nil
	}
	shown := req.Params[field]
	if req.Params["parse_mode"] == "HTML" {
		var err error
		if shown, err = Visible(shown); err != nil {
			return &Failure{Code: 400, Description: "Bad Request: can't parse entities: " + err.Error()}
		}
	}
	switch n := len(utf16.Encode([]rune(strings.TrimSpace(shown)))); {
	case n == 0 && field == "text":
		return &Failure{Code: 400, Description: "Bad Request: message text is empty"}
	case n > limit:
		return &Failure{Code: 400, Description: tooLong}
	}
	return nil
}

// tags are the HTML tags Telegram's HTML parse mode takes.
var tags = map[string]bool{"b": true, "strong": true, "i": true, "em": true, "u": true, "ins": true, "s": true, "strike": true,
	"del": true, "span": true, "tg-spoiler": true, "a": true, "code": true, "pre": true, "blockquote": true, "tg-emoji": true}

// Visible is what Telegram shows of text sent with parse_mode HTML, or
// why it refuses it: an unknown tag, a tag closed out of order or never,
// a stray "<" or an unknown entity.
func Visible(text string) (string, error) {
	var out strings.Builder
	var open []string
	for i := 0; i < len(text); {
		switch text[i] {
		case '<':
			end := strings.IndexByte(text[i:], '>')
			if end < 0 {
				return "", fmt.Errorf("unclosed start tag at byte offset %d", i)
			}
			tag := text[i+1 : i+end]
			if name, ok := strings.CutPrefix(tag, "/"); ok {
				if len(open) == 0 || open[len(open)-1] != strings.TrimSpace(name) {
					return "", fmt.Errorf("unmatched end tag at byte offset %d", i)
				}
				open = open[:len(open)-1]
			} else {
				name, _, _ := strings.Cut(tag, " ")
				if !tags[name] {
					return "", fmt.Errorf("unsupported start tag %q at byte offset %d", name, i)
				}
				open = append(open, name)
			}
			i += end + 1
		case '&':
			end := strings.IndexByte(text[i:], ';')
			if end < 0 || html.UnescapeString(text[i:i+end+1]) == text[i:i+end+1] {
				return "", fmt.Errorf("unsupported HTML entity at byte offset %d", i)
			}
			out.WriteString(html.UnescapeString(text[i : i+end+1]))
			i += end + 1
		default:
			out.WriteByte(text[i])
			i++
		}
	}
	if len(open) > 0 {
		return "", fmt.Errorf("can't find end tag corresponding to start tag %q", open[len(open)-1])
	}
	return out.String(), nil
}
