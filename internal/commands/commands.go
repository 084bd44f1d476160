// Package commands carries commands between the hosts of a fleet: a daemon
// asked to act on another host's session writes a command row and waits for
// its result; the owning daemon claims its rows and executes them through
// the same verb functions as its local callers (package verbs).
package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"herd"
	"herd/internal/errs"
	"herd/internal/loop"
	"herd/internal/store"
)

// Executor executes one claimed command on the owning host and returns
// what to tell the caller.
type Executor func(ctx context.Context, c herd.Command) (result string, err error)

// Runner claims this host's pending commands and executes them.
type Runner struct {
	st    store.Store
	host  string
	exec  Executor
	every time.Duration
	log   *slog.Logger
	// kick runs a round at once.
	kick chan struct{}
}

// MaxParallel bounds the commands executed at once: a stop may wait out a
// grace period, and the others need not wait behind it.
const MaxParallel = 8

// PollEvery is how often a Runner looks for commands unprompted. A store
// that notifies (PostgreSQL) wakes it at once through Kick; the poll only
// makes up for a lost notification.
const PollEvery = 10 * time.Second

// ExecTimeout bounds one command's execution (a stop's grace included),
// unless the command asks for longer (ArgExecTimeout).
const ExecTimeout = 2 * time.Minute

// ArgExecTimeout is the argument by which a command that may take longer
// than ExecTimeout (a rollout, a stop with a long grace period) asks for
// more time, as a Go duration; at most MaxExecTimeout.
const ArgExecTimeout = "exec_timeout"

// MaxExecTimeout bounds what ArgExecTimeout may ask for.
const MaxExecTimeout = 2 * time.Hour

// execTimeout is how long c may take.
func execTimeout(c herd.Command) time.Duration {
	d, err := time.ParseDuration(c.Args[ArgExecTimeout])
	if err != nil || d <= ExecTimeout {
		return ExecTimeout
	}
	return min(d, MaxExecTimeout)
}

// NewRunner returns a Runner for host's commands, looking for new ones
// every interval.
func NewRunner(st store.Store, host string, exec Executor, every time.Duration, log *slog.Logger) *Runner {
	return &Runner{st: st, host: host, exec: exec, every: every, log: log, kick: make(chan struct{}, 1)}
}

// Kick asks for a round now.
func (r *Runner) Kick() { loop.Wake(r.kick) }

// Run executes rounds until ctx is done.
func (r *Runner) Run(ctx context.Context) {
	loop.Loop{Name: "commands", Log: r.log, Every: r.every, Trigger: r.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		r.Round(ctx)
		return 0
	})
}

// Round claims every pending command of the host, executes them (at most
// MaxParallel at once) and records each result; it returns how many it
// executed. A claim is a serializable write: of racing claimers (a daemon
// restarted over its predecessor), each command goes to one. A round that
// finds nothing pending writes nothing: the steady state is one read-only
// transaction (a write would also make every loop read the live set again).
func (r *Runner) Round(ctx context.Context) int {
	var pending bool
	err := r.st.View(ctx, func(tx store.Tx) error {
		cs, err := tx.CommandsOnHost(r.host, herd.CommandPending)
		pending = len(cs) > 0
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("commands: look", "err", err)
		}
		return 0
	}
	if !pending {
		return 0
	}
	var claimed []herd.Command
	err = r.st.Update(ctx, func(tx store.Tx) error {
		claimed = claimed[:0] // fn may run again after a conflict
		pending, err := tx.CommandsOnHost(r.host, herd.CommandPending)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		for _, c := range pending {
			c.State, c.ClaimedAt = herd.CommandClaimed, now
			if err := tx.PutCommand(c); err != nil {
				return err
			}
			claimed = append(claimed, c)
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("commands: claim", "err", err)
		}
		return 0
	}
	loop.Each(MaxParallel, claimed, func(c herd.Command) { r.execute(ctx, c) })
	return len(claimed)
}

// execute runs c and records its outcome. The outcome is written even when
// the daemon is stopping: a caller is waiting for it.
func (r *Runner) execute(ctx context.Context, c herd.Command) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), execTimeout(c))
	defer cancel()
	res, err := r.exec(ectx, c)
	c.State, c.Result, c.DoneAt = herd.CommandDone, res, time.Now().UTC()
	if err != nil {
		c.State, c.Result = herd.CommandFailed, err.Error()
	}
	r.log.Info("command executed", "id", c.ID, "kind", c.Kind, "session", c.Session, "from", c.From, "state", c.State, "result", c.Result)
	if err := r.st.Update(ectx, func(tx store.Tx) error { return tx.PutCommand(c) }); err != nil {
		r.log.Error("commands: record result", "id", c.ID, "err", err)
	}
}

// TimeoutError is a command its host did not execute in time.
type TimeoutError struct {
	Host    string
	Session string
	After   time.Duration
	// Claimed: the host took it and may still carry it out.
	Claimed bool
}

func (e *TimeoutError) Error() string {
	if e.Claimed {
		return fmt.Sprintf("host %s took the command for %s but did not finish it within %v; it may still", e.Host, e.Session, e.After)
	}
	return fmt.Sprintf("host %s did not take the command for %s within %v (is its daemon running?); the command is cancelled", e.Host, e.Session, e.After)
}

// ErrKind: a timeout of the host that must act.
func (e *TimeoutError) ErrKind() errs.Kind { return errs.Timeout }

// FailedError is a command its host refused or could not carry out.
type FailedError struct {
	Host   string
	Result string
}

func (e *FailedError) Error() string { return fmt.Sprintf("host %s: %s", e.Host, e.Result) }

// ErrKind: a conflict (another host refused or could not carry it out).
func (e *FailedError) ErrKind() errs.Kind { return errs.Conflict }

// Submit writes c (Host, From, Kind, Session, Args) as a pending command
// and waits, polling from every poll up to every second, until its host records the outcome or
// timeout passes. A command not yet claimed by then is cancelled, so it
// never runs late. It returns the host's result, a *FailedError, or a
// *TimeoutError.
func Submit(ctx context.Context, st store.Store, c herd.Command, timeout, poll time.Duration) (string, error) {
	c.State, c.CreatedAt, c.ID = herd.CommandPending, time.Now().UTC(), 0
	err := st.Update(ctx, func(tx store.Tx) error {
		c.ID = 0
		return tx.AddCommand(&c)
	})
	if err != nil {
		return "", fmt.Errorf("commands: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		var cur herd.Command
		err := st.View(ctx, func(tx store.Tx) (err error) {
			cur, err = tx.Command(c.ID)
			return err
		})
		if err != nil {
			return "", fmt.Errorf("commands: %w", err)
		}
		switch cur.State {
		case herd.CommandDone:
			return cur.Result, nil
		case herd.CommandFailed:
			return "", &FailedError{Host: c.Host, Result: cur.Result}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return cancel(context.WithoutCancel(ctx), st, c, timeout)
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
		// Many callers waiting at once (a racing crowd) must not crowd out
		// the store: each waits longer the longer its command takes.
		poll = min(poll*3/2, maxPoll)
	}
}

// maxPoll bounds the wait between two reads of a waiting command.
const maxPoll = time.Second

// cancel marks c failed unless its host claimed it meanwhile, and returns
// what to report: a result that came at the last moment, or an error.
func cancel(ctx context.Context, st store.Store, c herd.Command, after time.Duration) (string, error) {
	terr := &TimeoutError{Host: c.Host, Session: c.Session, After: after}
	var (
		outcome  string
		outErr   error
		finished bool
	)
	err := st.Update(ctx, func(tx store.Tx) error {
		outcome, outErr, finished, terr.Claimed = "", nil, false, false
		cur, err := tx.Command(c.ID)
		if err != nil {
			return err
		}
		switch cur.State {
		case herd.CommandDone:
			outcome, finished = cur.Result, true
			return nil
		case herd.CommandFailed:
			outErr = &FailedError{Host: c.Host, Result: cur.Result}
			return nil
		case herd.CommandClaimed:
			terr.Claimed = true
			return nil
		}
		cur.State, cur.Result, cur.DoneAt = herd.CommandFailed, "cancelled: not taken in time", time.Now().UTC()
		return tx.PutCommand(cur)
	})
	switch {
	case err != nil:
		return "", errors.Join(terr, fmt.Errorf("commands: cancel: %w", err))
	case outErr != nil:
		return "", outErr
	case finished:
		return outcome, nil // at the last moment
	}
	return "", terr
}
