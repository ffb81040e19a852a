package transcribe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
)

func audio(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "transcriber")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func cfg(cmd ...string) config.Transcribe {
	return config.Transcribe{Command: cmd, Model: "whisper-1", Timeout: config.Duration(time.Minute)}
}

// The command gets the audio's path where {file} stands, as one argument
// however odd the path; no shell reads it, so $(…) and ; stay text. Its
// stdout, with white space tidied, is the transcript.
func TestCommand(t *testing.T) {
	ctx := context.Background()
	path := audio(t, "n$(touch pwned);x.ogg", "OggS fake")
	tr := script(t, `printf '  the note at %s\n says   hi \n' "$1"; printf '%s' "$2" >&2`)
	got, err := File(ctx, cfg(tr, "{file}", "--lang=$HOME;{file}"), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "the note at " + path + " says hi"; got != want {
		t.Errorf("transcript %q, want %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), "pwned")); err == nil {
		t.Error("the path was run as shell code")
	}

	// The daemon's secrets stay with the daemon.
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
	if got, err := File(ctx, cfg(script(t, `env`), "{file}"), path, nil); err != nil || strings.Contains(got, "sk-ant-secret") || !strings.Contains(got, "PATH=") {
		t.Errorf("the transcriber's environment: %q, %v", got, err)
	}

	for _, tc := range []struct {
		name, body, want string
	}{
		{"fails", `echo "model file not found: /no/model.bin" >&2; exit 2`, "exit status 2: model file not found: /no/model.bin"},
		{"silent", `exit 0`, "found no words"},
	} {
		_, err := File(ctx, cfg(script(t, tc.body), "{file}"), path, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := File(ctx, config.Transcribe{}, path, nil); !errors.Is(err, ErrNone) {
		t.Errorf("nothing configured: %v, want ErrNone", err)
	}
}

// A transcriber that hangs is ended with everything it started, and the
// error names the timeout.
func TestCommandTimeout(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	tr := script(t, `sleep 600 & echo $! > `+pidFile+`; wait`)
	c := cfg(tr, "{file}")
	c.Timeout = config.Duration(time.Second)
	_, err := File(context.Background(), c, audio(t, "a.ogg", "x"), nil)
	if err == nil || !strings.Contains(err.Error(), "media.transcribe.timeout") {
		t.Fatalf("error %v, want the timeout named", err)
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("the transcriber's child wrote no pid (%v), so nothing is proven", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			break
		}
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(st), ") Z ") {
			break // a zombie (Linux): killed, waiting for its reaper
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transcriber's child %d outlived the timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The endpoint gets the file as multipart form data with the model and
// the key as a bearer token; its "text" is the transcript, and an error
// answer is said with its status.
func TestEndpoint(t *testing.T) {
	var gotAuth, gotModel, gotFile, gotName string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth, gotModel = r.Header.Get("Authorization"), r.FormValue("model")
		f, fh, err := r.FormFile("file")
		if err == nil {
			b, _ := io.ReadAll(f)
			gotFile, gotName = string(b), fh.Filename
		}
		if r.URL.Path == "/broken" {
			http.Error(w, `{"error":{"message":"invalid api key"}}`, http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"text":" buy milk,\n please "}`))
	}))
	defer srv.Close()
	c := config.Transcribe{URL: srv.URL + "/v1/audio/transcriptions", APIKey: "sk-test", Model: "whisper-large", Timeout: config.Duration(time.Minute)}
	got, err := File(context.Background(), c, audio(t, "3EB0.ogg", "OggS voice"), nil)
	if err != nil || got != "buy milk, please" {
		t.Fatalf("transcript %q, %v", got, err)
	}
	if gotAuth != "Bearer sk-test" || gotModel != "whisper-large" || gotFile != "OggS voice" || gotName != "3EB0.ogg" {
		t.Errorf("request: auth %q, model %q, file %q named %q", gotAuth, gotModel, gotFile, gotName)
	}
	c.URL = srv.URL + "/broken"
	if _, err := File(context.Background(), c, audio(t, "a.ogg", "x"), nil); err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "sk-test") {
		t.Errorf("an error answer: %v; want its status, without the key", err)
	}
}
