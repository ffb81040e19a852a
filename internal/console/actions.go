package console

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// who names the console in audit lines and answers.
const who = "the owner (console)"

var codeRE = regexp.MustCompile(`^[A-Za-z0-9]{1,16}$`)

func answer(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

// body reads a small JSON object of strings (an empty body is {}).
func body(r *http.Request) (map[string]string, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	if len(strings.TrimSpace(string(b))) == 0 {
		return m, nil
	}
	return m, json.Unmarshal(b, &m)
}

func (s *Server) done(w http.ResponseWriter, r *http.Request, msg string, err error) {
	if err != nil {
		s.o.Log.Error().Err(err).Str("path", r.URL.Path).Msg("console: action")
		answer(w, http.StatusInternalServerError, "Failed: "+err.Error())
		return
	}
	s.o.Log.Info().Str("path", r.URL.Path).Str("answer", msg).Msg("console: the owner acted")
	answer(w, http.StatusOK, msg)
}

// groupAction is POST /api/groups/FOLDER/{pause,resume,reset-session,model}.
func (s *Server) groupAction(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	folder, action := r.PathValue("folder"), r.PathValue("action")
	if _, err := s.o.Groups.ByFolder(ctx, folder); errors.Is(err, groups.ErrNotFound) {
		answer(w, http.StatusNotFound, "No group "+folder+" is registered.")
		return
	} else if err != nil {
		s.done(w, r, "", err)
		return
	}
	switch action {
	case "pause", "resume":
		msg, err := s.o.Actions.Owner(ctx, "/"+action+" "+folder)
		s.done(w, r, msg, err)
	case "reset-session":
		msg, err := s.o.Actions.ResetSession(ctx, folder)
		s.done(w, r, msg, err)
	case "model":
		b, err := body(r)
		model := strings.TrimSpace(b["model"])
		if err != nil || model == "" || strings.ContainsAny(model, " \t\r\n") {
			answer(w, http.StatusBadRequest, `Send {"model": "NAME"}, one model name.`)
			return
		}
		msg, err := s.o.Actions.Owner(ctx, "/model "+folder+" "+model)
		s.done(w, r, msg, err)
	default:
		answer(w, http.StatusNotFound, "No action "+action+": pause, resume, reset-session or model.")
	}
}

// allow is POST /api/allow {"code"}: /allow CODE.
func (s *Server) allow(w http.ResponseWriter, r *http.Request) {
	b, err := body(r)
	code := strings.TrimSpace(b["code"])
	if err != nil || !codeRE.MatchString(code) {
		answer(w, http.StatusBadRequest, `Send {"code": "K7P"}, the code from an alert.`)
		return
	}
	msg, err := s.o.Actions.Owner(r.Context(), "/allow "+code)
	s.done(w, r, msg, err)
}

// undo is POST /api/undo: /undo.
func (s *Server) undo(w http.ResponseWriter, r *http.Request) {
	msg, err := s.o.Actions.Owner(r.Context(), "/undo")
	s.done(w, r, msg, err)
}

// taskAction is POST /api/tasks/ID/{run,pause,resume}.
func (s *Server) taskAction(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	if op != "run" && op != "pause" && op != "resume" {
		answer(w, http.StatusNotFound, "No task action "+op+": run, pause or resume.")
		return
	}
	msg, err := s.o.Actions.Task(r.Context(), r.PathValue("id"), op)
	s.done(w, r, msg, err)
}
