package reaper

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/loop"
	"herd/internal/runtime"
	"herd/internal/slots"
	"herd/internal/status"
)

// Lister is the tmux runtime as the reaper sees it.
type Lister interface {
	// List observes every session now.
	List(ctx context.Context) runtime.Snapshot
	// ObserveSession observes session name alone: the re-check and the
	// last look before one kill cost that session, not the server.
	ObserveSession(ctx context.Context, name string) runtime.Snapshot
	// KillUnmanaged kills a session that has no record, by exact name.
	KillUnmanaged(ctx context.Context, name string) error
}

// Stopper takes managed sessions down through the one stop path
// (*slots.Slots in the daemon).
type Stopper interface {
	// KillContext is the context of a takedown: it runs to its end
	// whatever its caller does, bounded by the grace period.
	KillContext(ctx context.Context) (context.Context, context.CancelFunc)
	// Stop stops a session (identity verified, one event, resume
	// snapshot kept); req.Guard runs under the session's lock just before
	// the first signal, and its error keeps the session. A session
	// stopped or relaunched meanwhile is slots.ErrAlreadyStopped.
	Stop(ctx context.Context, req slots.StopRequest) error
}

// WorktreeRemover removes a stopped session's worktree under delete
// role's rule.
type WorktreeRemover interface {
	Remove(ctx context.Context, session string)
}

// Outputs locates the captured output of exec agents (*execrt.Runtime in
// the daemon).
type Outputs interface {
	// Paths returns the stdout and stderr files of an incarnation.
	Paths(session, incarnation string) (stdout, stderr string)
}

// Options configure a Reaper.
type Options struct {
	Status *status.Manager
	// Slots stops managed sessions through the one stop path.
	Slots Stopper
	// Worktrees removes a reaped session's worktree when that loses
	// nothing (nil: worktrees are left alone).
	Worktrees WorktreeRemover
	Tmux      Lister
	// Exec tells when an exec agent's output last grew.
	Exec Outputs
	// Config gives [reaper], [probe] and [tmux].
	Config *config.Config
	// Live, when set, is read instead of Config: a reload applies a new
	// [reaper] table at once.
	Live *config.Live
	Log  *slog.Logger
}

// Reaper stops the sessions nobody needs.
type Reaper struct {
	o  Options
	st *status.Manager
	// passMu serializes passes: the loop's and `herd reap`'s.
	passMu sync.Mutex
	// wake runs the loop's check at once (a reload changed the interval).
	wake chan struct{}
}

// New returns a reaper; Run starts its loop.
func New(o Options) *Reaper { return &Reaper{o: o, st: o.Status, wake: make(chan struct{}, 1)} }

// cfg is the configuration in force.
func (r *Reaper) cfg() *config.Config {
	if r.o.Live != nil {
		return r.o.Live.Load()
	}
	return r.o.Config
}

// Reconfigured tells the reaper a reload changed [reaper]: its next pass
// is timed from the new interval at once.
func (r *Reaper) Reconfigured() { loop.Wake(r.wake) }

// firstPass is how soon after the daemon starts the first reaper pass runs
// (sooner when reaper.interval is shorter).
const firstPass = 10 * time.Second

// Run runs a reaper pass every reaper.interval, the first one shortly
// after the daemon starts. The reaper stops, through the one stop path,
// the sessions nobody needs: archived, orphaned (workdir gone, role no
// longer declared, herd-named tmux session with no record) and idle ones,
// never an attached one and never on a fact it could not read (see Decide
// for the policy and Pass for the round).
func (r *Reaper) Run(ctx context.Context) {
	interval := r.cfg().Reaper.Interval
	first := min(firstPass, interval)
	if interval <= 0 {
		// Off; a reload may turn it on: look once a minute.
		interval, first = time.Minute, time.Minute
	}
	// noted remembers the notes already logged (tmux not installed, ...),
	// so a condition that lasts is logged once, not every pass.
	noted := map[string]bool{}
	// last is when the last pass began: a reload's interval counts from it.
	last := time.Now().Add(-interval + first)
	loop.Loop{Name: "reaper", Log: r.o.Log, Every: interval, First: first, Trigger: r.wake}.Run(ctx, func(ctx context.Context) time.Duration {
		every := r.cfg().Reaper.Interval
		if every <= 0 {
			return time.Minute // off
		}
		if wait := time.Until(last.Add(every)); wait > 0 {
			return wait
		}
		last = time.Now()
		rep, err := r.Pass(ctx, PassOptions{})
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrListing):
			// tmux did not answer (hung, garbled, restarting): unknown is
			// never gone, so the pass waits for the next one.
			r.o.Log.Warn("reaper pass aborted; nothing reaped", "err", err)
		case err != nil:
			r.o.Log.Error("reaper pass aborted; nothing reaped", "err", err)
		default:
			for _, n := range rep.Notes {
				if !noted[n] {
					noted[n] = true
					r.o.Log.Info("reaper: " + n)
				}
			}
			r.LogPass(rep)
		}
		return every
	})
}

// LogPass logs one pass's outcome: every skip with its reason, and a
// summary.
func (r *Reaper) LogPass(rep api.ReapReport) {
	for _, c := range rep.Candidates {
		if c.Action == api.ReapActionSkipped {
			r.o.Log.Info("reaper skipped a session", "session", c.Session, "reason", c.Reason, "detail", c.Detail, "err", c.Error)
		}
	}
	r.o.Log.Info("reaper pass", "reaped", rep.Reaped, "kept", rep.Kept, "skipped", rep.Skipped, "took", time.Duration(rep.DurationMS)*time.Millisecond)
}
