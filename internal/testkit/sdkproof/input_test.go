package sdkproof

// What the real agent runner does with its input: a bad ContainerInput, and
// an image handed to the model.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

func TestBadInputGivesErrorFrame(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), runDeadline)
	defer cancel()
	for name, stdin := range map[string]string{
		"not JSON":       "{not json",
		"no sdkOptions":  `{"prompt":"hi","groupFolder":"family","chatJid":"local:family","isMain":false}`,
		"prompt missing": `{"groupFolder":"family","sdkOptions":{}}`,
	} {
		cmd := exec.CommandContext(ctx, e2e.Node(t), w.runner)
		cmd.Dir = w.groupDir("family")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home}
		cmd.Stdin = strings.NewReader(stdin)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		err := cmd.Run()
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
			t.Errorf("%s: exit = %v, want status 1", name, err)
		}
		frames := make(chan frame, 4)
		readFrames(&stdout, frames)
		f, ok := <-frames
		if !ok || f.Type != "" || f.Status != "error" || f.Result != nil || f.Error == "" {
			t.Errorf("%s: frame = %+v (stdout %q), want {status:error, result:null, error:...}", name, f, stdout.String())
		}
	}
}

// A photo the daemon saved in the group's folder and marked in the prompt
// ("[image 67 bytes, media/ID.png]") reaches the model as an image block, base64, with
// its media type, ahead of the text that mentions it; a marker naming a
// path outside media/ is left as text.
func TestImageReachesTheModel(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), runDeadline)
	defer cancel()
	// A real 1x1 PNG.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\xcf\xc0\xf0\x1f\x00\x05\x00\x01\xff\x89\x99=\x1d\x00\x00\x00\x00IEND\xaeB`\x82")
	if err := os.MkdirAll(filepath.Join(w.groupDir("main"), "media"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.groupDir("main"), "media", "3EB0CAT.png"), string(png), 0o644)
	mock := mockapi.New(t)
	mock.Script("IMAGE-PROBE", mockapi.Text("A very small picture."))
	opts := w.options(t, "main.sdkOptions.json", "main")
	prompt := "<messages>\n<message sender=\"Owner\" time=\"2026-11-21T10:00:00Z\">[image 67 bytes, media/3EB0CAT.png] IMAGE-PROBE what is this? [image media/../../operator/.ssh/id_test.png]</message>\n</messages>"
	run := w.start(t, ctx, "main", true, "", prompt, opts, mock.URL)
	_, result := run.untilResult(ctx)
	defer func() {
		if t.Failed() {
			logRequests(t, mock)
			t.Logf("runner stderr:\n%s", run.stderr.String())
		}
	}()
	if result.Status != "success" || result.Result == nil || *result.Result != "A very small picture." {
		t.Fatalf("result frame = %+v", result)
	}
	var found bool
	for _, body := range mock.Requests() {
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if json.Unmarshal(body, &req) != nil {
			continue
		}
		for _, m := range req.Messages {
			var blocks []struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Source struct {
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			}
			if m.Role != "user" || json.Unmarshal(m.Content, &blocks) != nil {
				continue
			}
			for i, b := range blocks {
				if b.Type != "image" {
					continue
				}
				found = true
				if b.Source.Data != base64.StdEncoding.EncodeToString(png) {
					t.Errorf("image block data is not the file's bytes: %.60q", b.Source.Data)
				}
				textAfter := false
				for _, later := range blocks[i+1:] {
					textAfter = textAfter || strings.Contains(later.Text, "IMAGE-PROBE")
				}
				if !textAfter {
					t.Errorf("the message text does not follow the image: %+v", blocks)
				}
				if n := strings.Count(string(m.Content), `"type":"image"`); n != 1 {
					t.Errorf("%d image blocks, want 1 (the path outside media/ must not be read)", n)
				}
				if b.Source.MediaType != "image/png" {
					t.Errorf("image block has media_type %q, want image/png", b.Source.MediaType)
				}
			}
		}
	}
	if !found {
		t.Fatal("no image block reached the model API")
	}
}
