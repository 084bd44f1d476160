package slots

import (
	"errors"
	"fmt"

	"herd/internal/store"
)

// BadInput is an error in what a caller asked for (an invalid role, a
// replica count out of range).
type BadInput struct{ Msg string }

func (e *BadInput) Error() string { return e.Msg }

// Badf formats a BadInput.
func Badf(format string, a ...any) error { return &BadInput{fmt.Sprintf(format, a...)} }

// named puts the kind and name of a row in front of err, unless err
// already names it (a store.NotFoundError: "session x not found").
func named(what, name string, err error) error {
	var nf *store.NotFoundError
	if errors.As(err, &nf) {
		return err
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}

// Named is named for the API's handlers.
func Named(what, name string, err error) error { return named(what, name, err) }
