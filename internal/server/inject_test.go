package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"herd/internal/api"
	"herd/internal/verbs"
)

// TestInjectLineBreakRefused: the API refuses an inject whose text holds
// a line break without "multiline" (400, saying how to ask), for one
// session and for many, before anything is looked up or typed.
func TestInjectLineBreakRefused(t *testing.T) {
	sv := New(Options{Verbs: verbs.New(verbs.Options{})})
	h := sv.Handler()
	for _, x := range []struct{ path, body string }{
		{"/v1/sessions/w-0/inject", `{"text":"first\nsecond","enter":false}`},
		{"/v1/sessions/w-0/inject", `{"text":"yes\r"}`},
		{"/v1/inject", `{"names":["w-0"],"text":"a\r\nb","enter":true}`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, x.path, strings.NewReader(x.body)))
		var e api.Error
		json.Unmarshal(rec.Body.Bytes(), &e)
		if rec.Code != http.StatusBadRequest || !strings.Contains(e.Error, "line break") || !strings.Contains(e.Error, `"multiline": true`) {
			t.Errorf("[%s %s] expected 400 naming multiline … got %d %q", x.path, x.body, rec.Code, rec.Body)
		}
	}
}
