// Package errs is the project's error vocabulary for its front doors: the
// kind of a failure (bad input, not found, a conflict with the state, a
// host unavailable, a timeout) and the one mapping of a kind to an HTTP
// status that the socket API and the console share. An error says its
// kind by implementing Kinded; the packages that fail declare their own
// errors and import nothing but this one for it. It imports nothing of
// herd.
package errs

import (
	"errors"
	"fmt"
	"net/http"
)

// Kind is what sort of failure an error is, as a caller sees it.
type Kind int

const (
	// Internal: herd failed (the default for an error of no kind).
	Internal Kind = iota
	// BadInput: what the caller asked for is invalid.
	BadInput
	// NotFound: what the caller named does not exist.
	NotFound
	// Conflict: the state does not allow it now (not stopped, another
	// host's, a process that cannot be verified, refused by its host).
	Conflict
	// Unavailable: the host that must act is down.
	Unavailable
	// Timeout: the host that must act did not answer in time.
	Timeout
	// Forbidden: the caller may not do it (an agent outside what its
	// role's manages and [mcp] verbs allow).
	Forbidden
)

// Kinded is an error that says its kind.
type Kinded interface{ ErrKind() Kind }

// Error is a message of a kind.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// ErrKind is e's kind.
func (e *Error) ErrKind() Kind { return e.Kind }

// New returns an error of kind k saying msg: for a package's sentinel
// errors (errors.Is compares them by identity).
func New(k Kind, msg string) *Error { return &Error{Kind: k, Msg: msg} }

// Badf formats an error in what a caller asked for (BadInput).
func Badf(format string, a ...any) error {
	return &Error{Kind: BadInput, Msg: fmt.Sprintf(format, a...)}
}

// IsBadInput reports whether err, or one it wraps, is bad input.
func IsBadInput(err error) bool { return KindOf(err) == BadInput }

// KindOf is the kind of the first error in err's chain that says one;
// Internal when none does.
func KindOf(err error) Kind {
	var k Kinded
	if errors.As(err, &k) {
		return k.ErrKind()
	}
	return Internal
}

// HTTPStatus is the status a front door answers err with.
func HTTPStatus(err error) int {
	switch KindOf(err) {
	case BadInput:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case Conflict:
		return http.StatusConflict
	case Unavailable:
		return http.StatusServiceUnavailable
	case Timeout:
		return http.StatusGatewayTimeout
	case Forbidden:
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// Naming is an error whose message already names the row it is about
// ("session x not found"): Named leaves it as it is.
type Naming interface{ NamesRow() bool }

// Named puts the kind and name of a row in front of err ("session x:
// ..."), unless err already names it (Naming).
func Named(what, name string, err error) error {
	var n Naming
	if errors.As(err, &n) && n.NamesRow() {
		return err
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}
