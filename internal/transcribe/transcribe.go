// Package transcribe turns a voice note into text, by a local program
// (media.transcribe.command, e.g. whisper.cpp's whisper-cli) or an
// OpenAI-compatible /v1/audio/transcriptions endpoint. It works on a copy
// the daemon keeps of the note (Keep), never on the group's folder; for a
// confined group the program runs as the run's user in a sandbox of its
// own (Jail), for the main group as the daemon. The audio is only ever a
// path in its argv, never a shell's input.
package transcribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// ErrNone says no transcriber is configured.
var ErrNone = errors.New("no transcriber is set up (media.transcribe.command or media.transcribe.url in the config)")

// maxText bounds what is read of a transcriber's answer: an hour of
// speech is well under it, a runaway program's output is cut.
const maxText = 1 << 20

// Configured reports whether cfg names a transcriber.
func Configured(cfg config.Transcribe) bool { return len(cfg.Command) > 0 || cfg.URL != "" }

// Jail is how a confined group's transcriber program runs: as User, in a
// sandbox (sandbox.ToolPlan) that shows it the system runtime, its own
// program and model files and the copy, with no network, within Limits.
type Jail struct {
	User   sandbox.User
	Limits sandbox.Limits
}

// File returns the text of the audio at path (absolute: a Copy), by
// cfg.Command if set (confined by jail unless it is nil), else by cfg.URL,
// within cfg.Timeout. The text has its runs of white space made single
// spaces.
func File(ctx context.Context, cfg config.Transcribe, path string, jail *Jail) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, max(cfg.Timeout.D(), time.Second))
	defer cancel()
	var (
		text string
		err  error
	)
	switch {
	case len(cfg.Command) > 0:
		text, err = command(ctx, cfg.Command, path, jail)
	case cfg.URL != "":
		text, err = endpoint(ctx, cfg, path)
	default:
		return "", ErrNone
	}
	if ctx.Err() == context.DeadlineExceeded {
		return "", fmt.Errorf("took longer than media.transcribe.timeout (%s)", cfg.Timeout.D())
	}
	if err != nil {
		return "", err
	}
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return "", errors.New("the transcriber found no words")
	}
	return text, nil
}

// command runs argv with every "{file}" replaced by path, in a process
// group of its own so that a timeout also ends what it started (a wrapper
// script's ffmpeg and whisper-cli); inside jail when it is set.
func command(ctx context.Context, argv []string, path string, jail *Jail) (string, error) {
	args := make([]string, len(argv))
	for i, a := range argv {
		args[i] = strings.ReplaceAll(a, "{file}", path)
	}
	name := filepath.Base(args[0])
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if jail != nil && runtime.GOOS != "linux" && os.Geteuid() != 0 {
		// No helper sandbox there (yet): the daemon is the owner's own
		// user, and the program reads the daemon's copy, not the group's.
		jail = nil
	}
	if jail != nil {
		plan := sandbox.ToolPlan(args, []string{filepath.Dir(path)}, filepath.Dir(path), jail.Limits)
		l, err := sandbox.ToolCommand(plan, jail.User)
		if err != nil {
			return "", err
		}
		defer l.Close()
		cmd = exec.CommandContext(ctx, l.Argv[0], l.Argv[1:]...)
		cmd.ExtraFiles = l.Files
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: l.Credential()}
	}
	cmd.Dir = filepath.Dir(path)
	cmd.Env = environ()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	var errOut tail
	cmd.Stdout = &limited{w: &out, n: maxText}
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := strings.TrimSpace(string(errOut.b))
		if msg != "" {
			return "", fmt.Errorf("%s: %w: %s", name, err, msg)
		}
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return out.String(), nil
}

// passed are the variables a transcriber gets from the daemon's
// environment: enough to find its programs and models, none of the
// daemon's secrets (it parses audio anyone in a chat can send).
var passed = []string{"PATH", "HOME", "USER", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE"}

func environ() []string {
	var env []string
	for _, name := range passed {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// endpoint posts the file as multipart form data, the way OpenAI's
// transcription API (and whisper.cpp's server, LocalAI, Groq…) take it.
func endpoint(ctx context.Context, cfg config.Transcribe, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", filepath.Base(path))
	if err == nil {
		_, err = io.Copy(part, f)
	}
	if err == nil {
		err = mw.WriteField("model", cfg.Model)
	}
	if err == nil {
		err = mw.WriteField("response_format", "json")
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, &body)
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("media.transcribe.url: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxText))
	if err != nil {
		return "", fmt.Errorf("media.transcribe.url: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("media.transcribe.url answered %s: %.200s", resp.Status, strings.TrimSpace(string(data)))
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Text == nil {
		return "", fmt.Errorf("media.transcribe.url answered without a JSON {\"text\"}: %.200s", strings.TrimSpace(string(data)))
	}
	return *out.Text, nil
}

// limited writes up to n bytes to w and drops the rest.
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if k := min(len(p), l.n); k > 0 {
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// tail keeps the last 500 bytes written: the end of a program's errors.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 500 {
		t.b = t.b[len(t.b)-500:]
	}
	return len(p), nil
}
