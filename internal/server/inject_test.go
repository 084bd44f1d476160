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

// TestBodyOneValue: a body of one JSON value and a second is refused
// (400), not carried out as its first says while the rest is dropped
// (found by FuzzAPIRequest: a scale to 3 followed by a scale to -1).
func TestBodyOneValue(t *testing.T) {
	fs := &fuzzSlots{}
	v := verbs.New(verbs.Options{Host: "h", Sessions: fs, Roles: fs, Kicker: fs, Reaper: fs, Tmux: fs, Reader: fs})
	h := New(Options{Verbs: v}).Handler()
	for _, x := range []struct{ path, body string }{
		{"/v1/roles/w/scale", `{"replicas":3} {"replicas":-1}`},
		{"/v1/roles/w/scale", `{"replicas":3}}`},
		{"/v1/sessions/w-0/inject", `{"text":"yes"} {"text":"no"}`},
		{"/v1/inject", `{"names":["w-0"],"text":"yes"}x`},
		{"/v1/activity", `{} {}`},
	} {
		code, body := serveOne(h, http.MethodPost, x.path, x.body)
		if code != http.StatusBadRequest || !strings.Contains(body, "after the JSON value") && !strings.Contains(body, "invalid character") {
			t.Errorf("[%s %s] expected 400 … got %d %s", x.path, x.body, code, body)
		}
	}
	if code, body := serveOne(h, http.MethodPost, "/v1/roles/w/scale", "{\"replicas\":3}\n"); code != http.StatusOK {
		t.Errorf("[one value and a newline] expected 200 … got %d %s", code, body)
	}
}
