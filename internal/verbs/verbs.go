// Package verbs is every user verb of herd, written once: stop, resume,
// restart, reset, signal, inject, archive, scale, apply, delete role,
// rollout restart and reap, each validating its request, carrying out its
// effect through the components' methods and saying what it did.
//
// Every front door calls it: the local API's handlers, the executor of
// commands written by other hosts, the console and the MCP server
// (through the API). A verb on another host's session or role is forwarded to that
// host's daemon (as a command row) and executed there by the same
// function, so it means the same wherever it was typed. The package never
// speaks HTTP and never signals a process itself.
package verbs

import (
	"context"
	"log/slog"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/reaper"
	"herd/internal/roles"
	"herd/internal/runtime"
	"herd/internal/runtime/tmux"
	"herd/internal/slots"

	"golang.org/x/sys/unix"
)

// SessionSlots are the slot operations on one session.
type SessionSlots interface {
	// Stop is the one stop path.
	Stop(ctx context.Context, req slots.StopRequest) error
	// Resume relaunches a stopped session and counts it again.
	Resume(ctx context.Context, name string) error
	// Restart gives a session a fresh incarnation; it returns its id.
	Restart(ctx context.Context, req slots.RestartRequest) (string, error)
	// Reset clears a session's crash count, re-arming a failed one.
	Reset(ctx context.Context, name string) (rearmed bool, err error)
	// Signal sends sig to the verified agent process; it returns its pid.
	Signal(ctx context.Context, name string, sig unix.Signal) (int, error)
}

// RoleSlots are the slot operations on roles.
type RoleSlots interface {
	// Apply validates and upserts roles.
	Apply(ctx context.Context, rs []herd.Role, o roles.ApplyOptions) ([]roles.RoleChange, error)
	// Scale sets a role's replicas.
	Scale(ctx context.Context, name string, replicas int) error
	// DeleteRole stops a role's sessions and forgets it.
	DeleteRole(ctx context.Context, name string) (int, error)
	// Rollout replaces a role's outdated sessions of this host.
	Rollout(ctx context.Context, req roles.RolloutRequest) (roles.RolloutReport, error)
	// Archive marks a session done.
	Archive(ctx context.Context, name string) error
}

// Kicker wakes the reconciler.
type Kicker interface {
	Kick()
}

// Reaper runs a reaper pass on demand.
type Reaper interface {
	// Pass decides (and, unless a dry run, reaps) once.
	Pass(ctx context.Context, o reaper.PassOptions) (api.ReapReport, error)
	// LogPass logs what a pass did.
	LogPass(rep api.ReapReport)
}

// Injector types text into a tmux session's agent pane.
type Injector interface {
	Inject(ctx context.Context, inc herd.Incarnation, text string, enter bool) error
}

// ClearInjector is an Injector that can empty the agent's input line
// first and make sure its Enter submits (tmux).
type ClearInjector interface {
	InjectCleared(ctx context.Context, inc herd.Incarnation, clear []string, text string, enter bool, sub runtime.Submit) error
}

// Reader reads the rows a verb judges by.
type Reader interface {
	// Session returns a session's row (store.ErrNotFound when none).
	Session(ctx context.Context, name string) (herd.Session, error)
	// Role returns a role's row (store.ErrNotFound when none).
	Role(ctx context.Context, name string) (herd.Role, error)
	// Incarnation returns an incarnation's row.
	Incarnation(ctx context.Context, id string) (herd.Incarnation, error)
	// Sessions returns the fleet's sessions of role (every role when ""),
	// by role and index.
	Sessions(ctx context.Context, role string) ([]herd.Session, error)
	// Stale reports whether host's daemon has not beaten within the
	// fleet's host timeout.
	Stale(ctx context.Context, host string) (bool, error)
}

// Forwarder hands a command to another host's daemon and waits for its
// outcome (commands.Submit).
type Forwarder interface {
	Forward(ctx context.Context, c herd.Command, timeout time.Duration) (string, error)
}

// The components behind the interfaces above.
var (
	_ SessionSlots  = (*slots.Slots)(nil)
	_ RoleSlots     = (*roles.Roles)(nil)
	_ Kicker        = (*slots.Slots)(nil)
	_ Reaper        = (*reaper.Reaper)(nil)
	_ ClearInjector = (*tmux.Runtime)(nil)
)

// Options are what the verbs act through.
type Options struct {
	// Host is this daemon's host.
	Host     string
	Sessions SessionSlots
	Roles    RoleSlots
	Kicker   Kicker
	Reaper   Reaper
	// Tmux types into tmux panes (a ClearInjector when it can).
	Tmux    Injector
	Reader  Reader
	Forward Forwarder
	// HostTimeout is the fleet's; it is named when a host is stale.
	HostTimeout time.Duration
	// CallTimeout bounds one external call (the probe timeout).
	CallTimeout time.Duration
	Log         *slog.Logger
}

// Verbs carries out the verbs of one daemon.
type Verbs struct {
	o Options

	// Answerer answers the needs of this host's sessions (the console);
	// set before the daemon runs, nil when it serves none.
	Answerer Answerer
}

// New returns the verbs of a daemon.
func New(o Options) *Verbs {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 2 * time.Second
	}
	return &Verbs{o: o}
}

// Result is what a verb tells its caller.
type Result struct {
	// Message is a one-line, human-readable outcome.
	Message string `json:"message"`
	// Host is the host whose daemon carried the verb out, when it was
	// forwarded to another one.
	Host string `json:"host,omitempty"`
}

func (r *Result) base() *Result { return r }

// opTimeout bounds the work a verb starts that must finish even when its
// caller goes away (a stop cut short would read as a crash).
const opTimeout = 2 * time.Minute

// detach is ctx without its cancellation, bounded by d: a verb, once
// begun, runs to its end whatever its caller does.
func detach(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
