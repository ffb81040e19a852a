package console

import (
	"context"
	"net/http"
)

func contextWith(r *http.Request, s session) context.Context {
	return context.WithValue(r.Context(), ctxKey{}, s)
}

func sessionOf(r *http.Request) session {
	s, _ := r.Context().Value(ctxKey{}).(session)
	return s
}
