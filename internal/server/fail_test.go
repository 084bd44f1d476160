package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"herd/internal/commands"
	"herd/internal/errs"
	"herd/internal/slots"
	"herd/internal/store"
	"herd/internal/verbs"
)

// TestFailCodes: a verb's error becomes the status its kind calls for,
// wherever the verb ran.
func TestFailCodes(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"not found", errs.Named("session", "w-0", store.ErrNotFound), http.StatusNotFound},
		{"bad input", errs.Badf("stop: --grace %q", "x"), http.StatusBadRequest},
		{"not stopped", fmt.Errorf("session w-0 is running: %w", slots.ErrNotStopped), http.StatusConflict},
		{"other host", &slots.OtherHostError{What: "session", Name: "w-0", Host: "b"}, http.StatusConflict},
		{"host down", &verbs.HostDownError{Kind: "stop", What: "session", Name: "w-0", Host: "b"}, http.StatusServiceUnavailable},
		{"not taken in time", fmt.Errorf("stop w-0: %w", &commands.TimeoutError{Host: "b"}), http.StatusGatewayTimeout},
		{"refused there", fmt.Errorf("stop w-0: %w", &commands.FailedError{Host: "b", Result: "session w-0: not found"}), http.StatusConflict},
		{"anything else", errors.New("disk on fire"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		fail(w, tt.err)
		if w.Code != tt.want {
			t.Errorf("[%s] expected %d … got %d", tt.name, tt.want, w.Code)
		}
	}
}
