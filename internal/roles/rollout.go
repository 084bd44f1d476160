package roles

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/rollout"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
)

// RolloutRequest asks for a role's outdated sessions to be replaced.
type RolloutRequest struct {
	Role string
	// MaxUnavailable is how many sessions are replaced at once (>= 1):
	// each batch's new incarnations run before the next batch stops.
	MaxUnavailable int
	// Ready bounds the wait for a new incarnation to run; zero is a minute.
	Ready time.Duration
	// All replaces every live session, outdated or not.
	All bool
	// MinReady is how long a new incarnation must keep running before
	// the next old one stops (an agent that dies at once is caught).
	MinReady time.Duration
}

// RolloutReport says what a rollout did.
type RolloutReport struct {
	Role string `json:"role"`
	// Replaced are the sessions replaced, each's Took from the old
	// incarnation's stop to the new one running (MinReady not included).
	Replaced []api.RolloutStep `json:"replaced"`
	// Left are the outdated sessions not replaced (the rollout stopped).
	Left []string `json:"left,omitempty"`
}

// Outdated returns the verdict for each of this host's sessions of role
// (every role when "") that runs an older template than its role's.
func (r *Roles) Outdated(ctx context.Context, role string) (map[string]rollout.Verdict, error) {
	// The live set status keeps: the sessions that can be outdated with
	// their open incarnations, no query per session (get sessions asks
	// on every call).
	roles, _, live, err := r.st.Listing(ctx)
	if err != nil {
		return nil, err
	}
	return r.OutdatedIn(roles, live, role), nil
}

// OutdatedIn is Outdated over a listing of the live set the caller read
// (status.Manager.Listing). Each role's fingerprint is computed once.
func (r *Roles) OutdatedIn(roles []herd.Role, live []status.Live, role string) map[string]rollout.Verdict {
	current := make(map[string]string, len(roles))
	for _, ro := range roles {
		if role == "" || ro.Name == role {
			current[ro.Name] = rollout.Fingerprint(ro)
		}
	}
	out := map[string]rollout.Verdict{}
	updated := r.o.Slots.BinaryUpdated()
	for _, l := range live {
		fp, ok := current[l.S.Role]
		if !ok {
			continue
		}
		v := rollout.JudgeFrom(l.S, l.Inc.Template, fp)
		if id, ok := updated[l.S.Name]; ok && id == l.S.Incarnation && l.S.State.Live() {
			v = withBinaryUpdated(v)
		}
		if v.Outdated {
			out[l.S.Name] = v
		}
	}
	return out
}

// Rollout replaces a role's outdated sessions through Restart, at most
// MaxUnavailable at a time, waiting for each batch's new incarnations to
// run before the next batch is stopped; a new incarnation that does not
// run (a crash, a bad command) stops the rollout, leaving the remaining
// old sessions running. Each replacement is recorded as a rollout event.
func (r *Roles) Rollout(ctx context.Context, req RolloutRequest) (RolloutReport, error) {
	rep := RolloutReport{Role: req.Role}
	if req.MaxUnavailable < 1 {
		return rep, errs.Badf("rollout: --max-unavailable must be at least 1")
	}
	if req.Ready <= 0 {
		req.Ready = time.Minute
	}
	var role herd.Role
	err := r.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if role, err = tx.Role(req.Role); err != nil {
			return errs.Named("role", req.Role, err)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	verdicts, err := r.Outdated(ctx, req.Role)
	if err != nil {
		return rep, err
	}
	sessions, err := r.sessions(ctx, req.Role)
	if err != nil {
		return rep, err
	}
	var todo []herd.Session
	for _, s := range sessions {
		v, outdated := verdicts[s.Name]
		if outdated || (req.All && s.State.CountsTowardReplicas()) {
			if !outdated {
				v.Reason = "requested"
			}
			s.Exit = &herd.Exit{Reason: v.Reason} // carried to the step below
			todo = append(todo, s)
		}
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].Index < todo[j].Index })
	r.o.Log.Info("rollout started", "role", role.Name, "sessions", len(todo), "max_unavailable", req.MaxUnavailable)
	for len(todo) > 0 {
		n := min(req.MaxUnavailable, len(todo))
		batch := todo[:n]
		steps := make([]api.RolloutStep, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, s := range batch {
			wg.Go(func() { steps[i], errs[i] = r.replace(ctx, s, req.Ready, req.MinReady) })
		}
		wg.Wait()
		todo = todo[n:]
		for i, st := range steps {
			if errs[i] == nil {
				rep.Replaced = append(rep.Replaced, st)
			}
		}
		if err := errors.Join(errs...); err != nil {
			for _, s := range todo {
				rep.Left = append(rep.Left, s.Name)
			}
			return rep, fmt.Errorf("rollout %s stopped: %w", role.Name, err)
		}
	}
	return rep, nil
}

// replace restarts one session for a rollout and waits for its new
// incarnation to run.
func (r *Roles) replace(ctx context.Context, s herd.Session, ready, minReady time.Duration) (api.RolloutStep, error) {
	step := api.RolloutStep{Session: s.Name, From: s.Incarnation, Reason: s.Exit.Reason}
	start := time.Now()
	data := map[string]any{"rollout": true, "outdated_reason": step.Reason}
	r.event(ctx, s, s.Incarnation, "replacing", fmt.Sprintf("rollout: replacing %s (%s)", s.Name, step.Reason), data)
	to, err := r.o.Slots.Restart(ctx, slots.RestartRequest{Name: s.Name, Reason: herd.EventRollout, Data: data})
	if err != nil {
		return step, err
	}
	step.To = to
	err = r.awaitRunning(ctx, s.Name, to, ready)
	step.Took = time.Since(start)
	if err == nil && minReady > 0 {
		err = r.keepsRunning(ctx, s.Name, to, minReady)
	}
	if err != nil {
		r.event(ctx, s, to, "stalled", fmt.Sprintf("rollout stopped: %s: %v", s.Name, err), data)
		return step, fmt.Errorf("%s: %w", s.Name, err)
	}
	r.event(ctx, s, to, "replaced", fmt.Sprintf("rollout: %s replaced, running after %s (and for %s since)", s.Name, step.Took.Round(time.Millisecond), minReady),
		map[string]any{"from": step.From, "to": to, "took": step.Took.String(), "min_ready": minReady.String()})
	return step, nil
}

// awaitRunning waits until session name runs incarnation inc.
func (r *Roles) awaitRunning(ctx context.Context, name, inc string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		var s herd.Session
		err := r.st.Store().View(ctx, func(tx store.Tx) (err error) {
			s, err = tx.Session(name)
			return err
		})
		if err != nil {
			return err
		}
		switch {
		case s.Incarnation != inc:
			return fmt.Errorf("its new incarnation ended (now %s)", s.State)
		case s.State == herd.StateRunning:
			return nil
		case !s.State.Live():
			what := string(s.State)
			if s.Exit != nil {
				what += " (" + s.Exit.Reason + ")"
			}
			return fmt.Errorf("its new incarnation did not run: %s", what)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("its new incarnation is still %s after %s", s.State, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// keepsRunning checks that session name keeps incarnation inc live for d.
func (r *Roles) keepsRunning(ctx context.Context, name, inc string, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		var s herd.Session
		err := r.st.Store().View(ctx, func(tx store.Tx) (err error) {
			s, err = tx.Session(name)
			return err
		})
		if err != nil {
			return err
		}
		if s.Incarnation != inc || !s.State.Live() {
			what := string(s.State)
			if s.Exit != nil {
				what += " (" + s.Exit.Reason + ")"
			}
			return fmt.Errorf("its new incarnation ran, then ended within %s: %s", d, what)
		}
		if time.Now().After(end) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// event appends a rollout event for session s.
func (r *Roles) event(ctx context.Context, s herd.Session, inc, reason, msg string, data map[string]any) {
	err := r.st.Store().Update(ctx, func(tx store.Tx) error {
		return tx.AppendEvent(r.st.Event(s, inc, herd.EventRollout, reason, msg, data))
	})
	if err != nil {
		r.o.Log.Warn("rollout: event not recorded", "session", s.Name, "err", err)
	}
}

// sessions returns this host's sessions of role (every role when role is
// ""), by role and index.
func (r *Roles) sessions(ctx context.Context, role string) ([]herd.Session, error) {
	_, sessions, _, err := r.st.Listing(ctx)
	if err != nil {
		return nil, err
	}
	var out []herd.Session
	for _, s := range sessions {
		if role == "" || s.Role == role {
			out = append(out, s)
		}
	}
	return out, nil
}

// withBinaryUpdated adds binary_updated to a verdict.
func withBinaryUpdated(v rollout.Verdict) rollout.Verdict {
	if v.Outdated {
		v.Reason += "; " + herd.ReasonBinaryUpdated
		return v
	}
	return rollout.Verdict{Outdated: true, Reason: herd.ReasonBinaryUpdated}
}
