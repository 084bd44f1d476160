// Package takedown ends what an incarnation runs: its processes, each
// identity-verified before every signal (SIGTERM to the process group,
// SIGKILL after the grace period, and what escaped the group, found by
// cgroup or marker), then what its runtime ran it in. What cannot be
// removed at once is retried in the background and reported in leftover
// events. Slots calls it for every takedown (a stop, a kill, a leftover, a
// moved copy); it never decides whether to stop, and never writes session
// state (only leftover events).
package takedown

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/errs"
	"herd/internal/proc"
	"herd/internal/runtime"
	"herd/internal/status"

	"golang.org/x/sys/unix"
)

// Ops counts the caller's operations in flight: a retry of leftovers is
// one, refused once the caller shuts down.
type Ops interface {
	// Begin registers an operation; false means shutting down.
	Begin() bool
	// End marks an operation begun with Begin as done.
	End()
}

// Options configure a Takedown.
type Options struct {
	// Status records leftover events.
	Status *status.Manager
	// Runtimes maps a runtime kind (tmux, exec) to its runtime.
	Runtimes map[string]runtime.Runtime
	Proc     proc.FS
	BootID   string
	// Contain ends what left the process group; nil ends the group only.
	Contain *cgroup.Containment
	Ops     Ops
	Log     *slog.Logger
}

// Takedown ends incarnations and retries what they left behind.
type Takedown struct {
	o  Options
	st *status.Manager
	// left retries what takedowns left behind.
	left leftovers
}

// New returns a Takedown; Run retries its leftovers.
func New(o Options) *Takedown {
	t := &Takedown{o: o, st: o.Status}
	t.left.wake = make(chan struct{}, 1)
	return t
}

// ErrUnverified means the process's identity could not be verified, so
// herd did not signal it.
var ErrUnverified error = errs.New(errs.Conflict, "process identity cannot be verified; not signalled")

// Terminate takes an incarnation's processes down, verifying identity
// before every signal: SIGTERM to the process group, SIGKILL after grace;
// what the runtime ran it in (a tmux pane) is removed too, and what cannot
// be removed now is retried (see leftovers). A process whose identity
// cannot be verified is never signalled. killed reports whether a process
// outlived grace and got SIGKILL.
func (t *Takedown) Terminate(ctx context.Context, inc herd.Incarnation, grace time.Duration) (killed bool, err error) {
	killed, _, err = t.TerminateSeen(ctx, inc, grace)
	return killed, err
}

// TerminateSeen is Terminate that also says whether any process of inc
// was found running (a target alive, or a process swept by its cgroup or
// marker): for a launch whose start was never recorded, whether one of
// its processes ever ran.
func (t *Takedown) TerminateSeen(ctx context.Context, inc herd.Incarnation, grace time.Duration) (killed, ran bool, err error) {
	fs, boot := t.o.Proc, t.o.BootID
	// What left the process group (a setsid child, a daemonized dev
	// server) carries the incarnation's marker: it is asked to go at the
	// same moment as the group, so the whole tree is gone within one
	// grace period. Only what runs now: processes the agent starts while
	// it shuts down (its cleanup) are its own to wait for.
	start := time.Now()
	t.termEscaped(inc)
	for _, id := range targets(inc) {
		switch fs.Check(id, boot) {
		case herd.Unknown:
			return killed, ran, fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		case herd.Dead:
			continue
		}
		ran = true
		if id.Marker != inc.ID {
			// A pid on a runtime's word only: signalled once it is
			// proven to carry this incarnation's marker, never before.
			proven, ok := t.prove(id, inc.ID)
			if !ok {
				if fs.Check(id, boot) == herd.Dead {
					continue
				}
				return killed, ran, fmt.Errorf("pid %d does not carry this incarnation's marker: %w", id.PID, ErrUnverified)
			}
			id = proven
		}
		if err := t.signal(id, unix.SIGTERM); err != nil {
			return killed, ran, err
		}
		if !t.waitGone(ctx, id, grace) {
			t.o.Log.Warn("agent ignored SIGTERM; sending SIGKILL", "pid", id.PID, "grace", grace)
			killed = true
			if err := t.signal(id, unix.SIGKILL); err != nil {
				return killed, ran, err
			}
			t.waitGone(ctx, id, 5*time.Second)
		}
		// Only a process seen dead counts as stopped.
		switch fs.Check(id, boot) {
		case herd.Alive:
			return killed, ran, fmt.Errorf("pid %d is still alive after SIGKILL", id.PID)
		case herd.Unknown:
			return killed, ran, fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		}
	}
	// What is left (an escaped process that ignored SIGTERM, a cleanup
	// that outlived the agent) is ended with the rest of the grace.
	n, swept := t.sweep(ctx, inc.ID, max(grace-time.Since(start), 0))
	ran = ran || n > 0
	// Every process of the incarnation is seen dead: the stop is done.
	// What cannot be removed or ended now (tmux hung, its listing
	// unreadable, a marked process unverifiable) is retried and
	// reported, never silently left.
	if rt, ok := t.o.Runtimes[inc.RuntimeKind]; ok {
		if err := rt.Remove(ctx, inc); err != nil {
			t.leaveBehind(inc, err)
		} else if swept != nil {
			t.leaveBehind(inc, swept)
		}
	}
	return killed, ran, nil
}

// signal sends sig to id's process group after verifying its identity.
// A refusal is re-judged by a fresh Check: dead is done, unknown is an
// error, and alive (the refusal was transient) is tried again.
func (t *Takedown) signal(id herd.Identity, sig unix.Signal) error {
	var err error
	for range 5 {
		err = proc.SignalGroup(t.o.Proc, id, t.o.BootID, sig)
		if err == nil || errors.Is(err, proc.ErrNoProcess) {
			return nil
		}
		if !errors.Is(err, proc.ErrIdentityMismatch) {
			return fmt.Errorf("pid %d: %v: %w", id.PID, sig, err)
		}
		switch t.o.Proc.Check(id, t.o.BootID) {
		case herd.Dead:
			return nil
		case herd.Unknown:
			return fmt.Errorf("pid %d: %w", id.PID, ErrUnverified)
		}
		t.o.Log.Warn("signal refused, yet the process checks alive; retrying", "pid", id.PID, "signal", sig, "err", err)
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pid %d: %v: %w", id.PID, sig, err)
}

// waitGone waits up to timeout for id to exit; it reports whether it did.
func (t *Takedown) waitGone(ctx context.Context, id herd.Identity, timeout time.Duration) bool {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := proc.WaitExit(wctx, t.o.Proc, id, t.o.BootID)
		if err == nil || t.o.Proc.Check(id, t.o.BootID) == herd.Dead {
			return true
		}
		if wctx.Err() != nil {
			return false
		}
		// Refused (an unreadable moment): look again shortly.
		select {
		case <-wctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// targets lists the identities to signal: the launched root (its group
// holds the whole tree), and the agent when it differs.
func targets(inc herd.Incarnation) []herd.Identity {
	var out []herd.Identity
	if !inc.Root.Zero() {
		out = append(out, inc.Root)
	}
	if !inc.Identity.Zero() && inc.Identity != inc.Root {
		out = append(out, inc.Identity)
	}
	return out
}

// sweep ends every process still carrying incarnation inc's cgroup or
// marker (identity-checked, TERM, grace, KILL), logs what it found, and
// returns how many it found (at least 1 when its cgroup shows one ran)
// and what it could not end.
func (t *Takedown) sweep(ctx context.Context, inc string, grace time.Duration) (found int, err error) {
	if t.o.Contain == nil {
		return 0, nil
	}
	rep, err := t.o.Contain.Stop(ctx, inc, grace)
	if err != nil {
		t.o.Log.Warn("processes of an ended incarnation not all ended", "incarnation", inc, "err", err)
	}
	if rep.Swept > 0 || rep.Killed {
		t.o.Log.Info("ended what was left of an incarnation's tree", "incarnation", inc, "mode", rep.Mode,
			"swept", rep.Swept, "killed", rep.Killed, "took", rep.Took.Round(time.Millisecond))
	}
	if rep.Ran {
		return max(rep.Swept, 1), err
	}
	return rep.Swept, err
}

// prove reads id's process again and returns its identity when it is the
// same process (pid, start time) and carries marker; a moment's empty
// environment (a process mid-exec) is read again.
func (t *Takedown) prove(id herd.Identity, marker string) (herd.Identity, bool) {
	for range 3 {
		cur, err := t.o.Proc.Identify(id.PID, t.o.BootID)
		if err != nil || cur.StartTime != id.StartTime {
			return herd.Identity{}, false
		}
		if cur.Marker == marker {
			return cur, true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return herd.Identity{}, false
}

// termEscaped sends SIGTERM, identity-checked, to the live processes
// carrying incarnation inc's marker outside its root's process group (the
// group itself is signalled as a whole).
func (t *Takedown) termEscaped(inc herd.Incarnation) {
	if t.o.Contain == nil || inc.Root.Zero() {
		return
	}
	fs, boot := t.o.Proc, t.o.BootID
	root, err := fs.Stat(inc.Root.PID)
	if err != nil {
		return
	}
	var ids []herd.Identity
	if pids, ok := t.o.Contain.Members(inc.ID); ok {
		// Started in its cgroup: the group lists the whole tree.
		for _, pid := range pids {
			if id, err := fs.Identify(pid, boot); err == nil && id.Marker == inc.ID {
				ids = append(ids, id)
			}
		}
	} else if ids, err = cgroup.Marked(fs, boot, inc.ID); err != nil {
		return
	}
	for _, id := range ids {
		if st, err := fs.Stat(id.PID); err == nil && st.PGRP != root.PGRP {
			_ = proc.Signal(fs, id, boot, unix.SIGTERM)
		}
	}
}
