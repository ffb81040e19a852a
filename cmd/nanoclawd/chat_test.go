package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A typed line is text; /file and /voice send a file as WhatsApp would
// (its type from the extension, else the content), /react a reaction.
func TestChatMessage(t *testing.T) {
	dir := t.TempDir()
	pdf, ogg := filepath.Join(dir, "report.pdf"), filepath.Join(dir, "note.ogg")
	os.WriteFile(pdf, []byte("%PDF-1.4"), 0o600)
	os.WriteFile(ogg, []byte("OggS"), 0o600)

	if m, err := chatMessage("@Andy hi there"); err != nil || m.Text != "@Andy hi there" || m.Media != nil {
		t.Errorf("text: %+v, %v", m, err)
	}
	m, err := chatMessage("/file " + pdf + " the quarterly numbers")
	if err != nil || m.Text != "the quarterly numbers" || m.Media == nil || m.Media.Type != "application/pdf" ||
		m.Media.Name != "report.pdf" || m.Media.Voice || m.Media.DataBase64 != base64.StdEncoding.EncodeToString([]byte("%PDF-1.4")) {
		t.Errorf("/file: %+v (%+v), %v", m, m.Media, err)
	}
	if m, err := chatMessage("/voice " + ogg); err != nil || !m.Media.Voice || !strings.HasPrefix(m.Media.Type, "audio/ogg") || m.Text != "" {
		t.Errorf("/voice: %+v, %v", m, err)
	}
	if m, err := chatMessage("/react 3EB0 👍"); err != nil || m.ReactTo != "3EB0" || m.Emoji != "👍" || m.Text != "" {
		t.Errorf("/react: %+v, %v", m, err)
	}
	for _, bad := range []string{"/react 3EB0", "/file " + filepath.Join(dir, "missing.pdf")} {
		if _, err := chatMessage(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
