package execrt

import (
	"context"
	"fmt"

	"herd"
	"herd/internal/runtime"
)

var _ runtime.Runtime = (*Runtime)(nil)

// Start launches spec as a detached child; its exit is read by Wait.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec, _ int) (runtime.Started, error) {
	p, err := r.Launch(ctx, spec)
	if err != nil {
		return runtime.Started{}, err
	}
	return runtime.Started{RootPID: p.PID, Wait: p.Wait}, nil
}

// Remove has nothing to clear: an exec agent leaves only its output files,
// which are kept for logs and pruned by later launches.
func (r *Runtime) Remove(context.Context, herd.Incarnation) error { return nil }

// Capture returns the last lines of the incarnation's captured stdout (all
// of it, within ReadTail's cap, when lines <= 0).
func (r *Runtime) Capture(_ context.Context, inc herd.Incarnation, lines int) ([]byte, error) {
	out, _ := r.Paths(inc.Session, inc.ID)
	return ReadTail(out, lines)
}

// Inject is not possible: an exec agent's stdin is not herd's to type into.
func (r *Runtime) Inject(_ context.Context, inc herd.Incarnation, _ string, _ bool) error {
	return fmt.Errorf("inject: session %s runs as an exec child: %w", inc.Session, runtime.ErrNotSupported)
}
