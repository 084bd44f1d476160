package verbs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"herd"
	"herd/internal/agents"
	"herd/internal/errs"
	"herd/internal/runtime"
	"herd/internal/slots"
	"herd/internal/store"

	"golang.org/x/sys/unix"
)

// SessionRequest names the session of a verb that takes nothing else
// (resume, archive, reset).
type SessionRequest struct {
	Name string
	// From is the host whose daemon forwarded the verb here; "" for a
	// caller of this host. A forwarded verb is never forwarded again.
	From string
}

// StopRequest asks for herd stop.
type StopRequest struct {
	Name string
	// Grace overrides the daemon's grace period before SIGKILL ("10s");
	// "" keeps it.
	Grace string
	From  string
}

// RestartRequest asks for herd restart of one session.
type RestartRequest struct {
	Name  string
	Grace string
	From  string
}

// SignalRequest asks for herd signal.
type SignalRequest struct {
	Name string
	// Signal is a name (TERM, SIGTERM, term) or a number.
	Signal string
	From   string
}

// InjectRequest asks for herd inject.
type InjectRequest struct {
	Name  string
	Text  string
	Enter bool
	// NoClear keeps what is on the agent's input line; by default the
	// agent's clear keys empty it first.
	NoClear bool
	// Multiline lets Text hold line breaks: it is pasted (bracketed
	// paste, where the agent asked for it), so a line break is part of
	// the input, not an Enter. Without it, text with a line break is
	// refused (CheckText).
	Multiline bool
	From      string
}

// CheckText refuses text holding a line break (\r or \n) unless the
// request asked for multi-line input: typed, a line break presses Enter,
// and a caller who asked for no Enter would submit anyway.
func CheckText(text string, multiline bool) error {
	if multiline || !strings.ContainsAny(text, "\r\n") {
		return nil
	}
	return errs.Badf("inject: the text holds a line break (\\n or \\r), which would press Enter mid-text: " +
		`ask for multi-line input (herd inject --multiline, "multiline": true) to paste it as one input, or send one line`)
}

// Restarted is one session given a fresh incarnation (or not: Error).
type Restarted struct {
	Session     string `json:"session"`
	Incarnation string `json:"incarnation,omitempty"`
	Error       string `json:"error,omitempty"`
}

// RestartResult is what a restart did.
type RestartResult struct {
	Result
	Restarted []Restarted `json:"restarted"`
}

// ResetResult is what a reset did.
type ResetResult struct {
	Result
	// Rearmed: the session was failed and relaunches now.
	Rearmed bool `json:"rearmed"`
}

// SignalResult is what a signal did.
type SignalResult struct {
	Result
	PID int `json:"pid"`
}

// via is what an event's message adds for a verb forwarded from host from.
func via(from string) string {
	if from == "" || from == "?" {
		return ""
	}
	return " (via host " + from + ")"
}

// namedSession names a session that does not exist.
func namedSession(name string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errs.Named("session", name, err)
	}
	return err
}

// Stop stops a session through the one stop path, keeping a resume
// snapshot; its role's replica count drops by one, so nothing else stops
// or launches in its place.
func (v *Verbs) Stop(ctx context.Context, req StopRequest) (Result, error) {
	grace, err := ParseGrace("stop", req.Grace)
	if err != nil {
		return Result{}, err
	}
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return Result{}, err
		}
		return forward[Result](ctx, v, host, herd.CommandStop, "session", req.Name, map[string]string{"grace": req.Grace}, RemoteTimeout+grace)
	}
	ctx, cancel := detach(ctx, opTimeout+grace)
	defer cancel()
	err = v.o.Sessions.Stop(ctx, slots.StopRequest{Name: req.Name, Reason: herd.ReasonUser, DropReplica: true,
		Message: "stopped by user" + via(req.From), Grace: grace})
	switch {
	case errors.Is(err, slots.ErrAlreadyStopped):
		return Result{Message: fmt.Sprintf("session %s already stopped", req.Name)}, nil
	case err != nil:
		return Result{}, namedSession(req.Name, err)
	}
	v.o.Kicker.Kick()
	return Result{Message: fmt.Sprintf("session %s stopped", req.Name)}, nil
}

// Resume relaunches a stopped session from its snapshot; it counts toward
// its role's replicas again.
func (v *Verbs) Resume(ctx context.Context, req SessionRequest) (Result, error) {
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return Result{}, err
		}
		return forward[Result](ctx, v, host, herd.CommandResume, "session", req.Name, nil, RemoteTimeout)
	}
	ctx, cancel := detach(ctx, opTimeout)
	defer cancel()
	if err := v.o.Sessions.Resume(ctx, req.Name); err != nil {
		return Result{}, namedSession(req.Name, err)
	}
	return Result{Message: fmt.Sprintf("session %s resumed", req.Name)}, nil
}

// Archive marks a session done; the reaper stops it once detached.
func (v *Verbs) Archive(ctx context.Context, req SessionRequest) (Result, error) {
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return Result{}, err
		}
		return forward[Result](ctx, v, host, herd.CommandArchive, "session", req.Name, nil, RemoteTimeout)
	}
	if err := v.o.Roles.Archive(ctx, req.Name); err != nil {
		return Result{}, err
	}
	return Result{Message: fmt.Sprintf("session %s archived", req.Name)}, nil
}

// Restart gives a session a fresh incarnation through the stop path and
// a launch, its slot held from one to the other; a failed session is
// re-armed. Replica counts do not change.
func (v *Verbs) Restart(ctx context.Context, req RestartRequest) (RestartResult, error) {
	grace, err := ParseGrace("restart", req.Grace)
	if err != nil {
		return RestartResult{}, err
	}
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return RestartResult{}, err
		}
		return forward[RestartResult](ctx, v, host, herd.CommandRestart, "session", req.Name, map[string]string{"grace": req.Grace}, RemoteTimeout+grace)
	}
	ctx, cancel := detach(ctx, opTimeout+grace)
	defer cancel()
	inc, err := v.o.Sessions.Restart(ctx, slots.RestartRequest{Name: req.Name, Grace: grace})
	if err != nil {
		return RestartResult{}, err
	}
	v.o.Log.Info("session restarted by user", "session", req.Name, "incarnation", inc, "from", req.From)
	return RestartResult{
		Result:    Result{Message: fmt.Sprintf("session %s restarted (incarnation %s)", req.Name, inc)},
		Restarted: []Restarted{{Session: req.Name, Incarnation: inc}},
	}, nil
}

// Reset clears a session's crash count; a failed session relaunches now.
func (v *Verbs) Reset(ctx context.Context, req SessionRequest) (ResetResult, error) {
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return ResetResult{}, err
		}
		return forward[ResetResult](ctx, v, host, herd.CommandReset, "session", req.Name, nil, RemoteTimeout)
	}
	rearmed, err := v.o.Sessions.Reset(ctx, req.Name)
	if err != nil {
		return ResetResult{}, err
	}
	msg := fmt.Sprintf("session %s: crash count reset", req.Name)
	if rearmed {
		msg += "; it was failed and relaunches now"
	}
	return ResetResult{Result: Result{Message: msg}, Rearmed: rearmed}, nil
}

// Signal sends a signal to a session's verified agent process.
func (v *Verbs) Signal(ctx context.Context, req SignalRequest) (SignalResult, error) {
	sig, err := ParseSignal(req.Signal)
	if err != nil {
		return SignalResult{}, errs.Badf("signal %s: %v", req.Name, err)
	}
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return SignalResult{}, err
		}
		return forward[SignalResult](ctx, v, host, herd.CommandSignal, "session", req.Name, map[string]string{"signal": req.Signal}, RemoteTimeout)
	}
	pid, err := v.o.Sessions.Signal(ctx, req.Name, sig)
	if err != nil {
		return SignalResult{}, err
	}
	return SignalResult{Result: Result{Message: fmt.Sprintf("%s sent to session %s (pid %d)", unix.SignalName(sig), req.Name, pid)}, PID: pid}, nil
}

// submitFor is how an Enter after text is made to submit on agent kind.
func submitFor(kind, text string) runtime.Submit {
	return runtime.Submit{
		Settle: agents.SubmitSettle(kind),
		Holds:  func(screen string) (bool, bool) { return agents.InputHolds(kind, screen, text) },
	}
}

// injectRequest reads inject's command arguments (an absent no_clear, an
// older daemon's row, clears).
func injectRequest(name string, a map[string]string, from string) InjectRequest {
	enter, _ := strconv.ParseBool(a["enter"])
	noClear, _ := strconv.ParseBool(a["no_clear"])
	multiline, _ := strconv.ParseBool(a["multiline"])
	return InjectRequest{Name: name, Text: a["text"], Enter: enter, NoClear: noClear, Multiline: multiline, From: from}
}

// Inject types text into a live tmux session's agent: into the pane herd
// launched for it, never whichever pane a user attached to it made
// active. Unless NoClear, the agent's clear keys (agents.ClearKeys of the
// role's agent) empty its input line first, so leftover text of an
// interrupted turn is not glued to the new prompt. With Enter, the text
// must be submitted: Enter waits for the pane to show the text and for
// the agent's fast-return window, and where herd can read the agent's
// input line the text must leave it (Enter is pressed once more, then the
// inject fails).
func (v *Verbs) Inject(ctx context.Context, req InjectRequest) (Result, error) {
	if err := CheckText(req.Text, req.Multiline); err != nil {
		return Result{}, err
	}
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return Result{}, err
		}
		args := map[string]string{"text": req.Text, "enter": strconv.FormatBool(req.Enter), "no_clear": strconv.FormatBool(req.NoClear),
			"multiline": strconv.FormatBool(req.Multiline)}
		return forward[Result](ctx, v, host, herd.CommandInject, "session", req.Name, args, RemoteTimeout)
	}
	s, err := v.o.Reader.Session(ctx, req.Name)
	if err != nil {
		return Result{}, namedSession(req.Name, err)
	}
	if s.Host != v.o.Host {
		return Result{}, &slots.OtherHostError{What: "session", Name: s.Name, Host: s.Host}
	}
	if s.RuntimeKind != herd.RuntimeTmux || !s.State.Live() {
		return Result{}, errs.Badf("inject: session %s is not a live tmux session (%s, %s)", req.Name, s.RuntimeKind, s.State)
	}
	role, err := v.o.Reader.Role(ctx, s.Role)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Result{}, err // the role gone: no agent known, nothing cleared
	}
	inc, err := v.o.Reader.Incarnation(ctx, s.Incarnation)
	if err != nil {
		return Result{}, err
	}
	var keys []string
	if !req.NoClear && req.Text != "" {
		// No text, nothing to glue to: an empty inject submits what is
		// on the input line.
		keys = agents.ClearKeys(role.Agent)
	}
	ctx, cancel := context.WithTimeout(ctx, v.o.CallTimeout*4)
	defer cancel()
	if c, ok := v.o.Tmux.(ClearInjector); ok {
		sub := submitFor(role.Agent, req.Text)
		sub.Paste = req.Multiline
		err = c.InjectCleared(ctx, inc, keys, req.Text, req.Enter, sub)
	} else if req.Multiline {
		return Result{}, errs.Badf("inject: session %s: this runtime cannot paste multi-line text", req.Name)
	} else {
		keys = nil
		err = v.o.Tmux.Inject(ctx, inc, req.Text, req.Enter)
	}
	if err != nil {
		return Result{}, fmt.Errorf("inject: %w", err)
	}
	msg := fmt.Sprintf("%d bytes sent to %s", len(req.Text), req.Name)
	if len(keys) > 0 {
		msg += " (input line cleared first)"
	}
	return Result{Message: msg}, nil
}
