package errs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// rowNotFound stands for a store's not-found error: a kind, and a message
// that names its row.
type rowNotFound struct{ name string }

func (e *rowNotFound) Error() string  { return "session " + e.name + " not found" }
func (e *rowNotFound) ErrKind() Kind  { return NotFound }
func (e *rowNotFound) NamesRow() bool { return true }

func TestHTTPStatus(t *testing.T) {
	conflict := New(Conflict, "not stopped")
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"bad input", Badf("replicas %d out of range", -1), http.StatusBadRequest},
		{"bad input, wrapped", fmt.Errorf("apply: %w", Badf("no command")), http.StatusBadRequest},
		{"not found, named", Named("session", "x", &rowNotFound{"x"}), http.StatusNotFound},
		{"a sentinel conflict, wrapped", fmt.Errorf("stop: %w", conflict), http.StatusConflict},
		{"unavailable", New(Unavailable, "host b down"), http.StatusServiceUnavailable},
		{"timeout", New(Timeout, "host b did not answer"), http.StatusGatewayTimeout},
		{"the first kind in the chain", fmt.Errorf("%w", &Error{Kind: Conflict, Msg: fmt.Sprintf("x: %v", Badf("y"))}), http.StatusConflict},
		{"no kind", errors.New("disk full"), http.StatusInternalServerError},
		{"a context's end is ours", context.DeadlineExceeded, http.StatusInternalServerError},
	} {
		if got := HTTPStatus(c.err); got != c.want {
			t.Errorf("[%s] expected %d, got %d", c.name, c.want, got)
		}
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", conflict), conflict) {
		t.Errorf("expected a sentinel to match itself through a wrap")
	}
}

func TestNamed(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"a plain error gets the row's name", New(Conflict, "not stopped"), "session w-0: not stopped"},
		{"one that names its row is left", &rowNotFound{"w-0"}, "session w-0 not found"},
		{"also when wrapped", fmt.Errorf("read: %w", &rowNotFound{"w-0"}), "read: session w-0 not found"},
	} {
		if got := Named("session", "w-0", c.err).Error(); got != c.want {
			t.Errorf("[%s] expected %q, got %q", c.name, c.want, got)
		}
	}
}
