package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
	"herd/internal/commands"
	"herd/internal/runtime/tmux"
	"herd/internal/slots"
	"herd/internal/store"
)

// RemoteTimeout is how long a command for another host's session waits
// for that host's daemon; a request's ?timeout= may shorten it.
const RemoteTimeout = 30 * time.Second

// remotePoll is how often a waiting command's row is read.
const remotePoll = 100 * time.Millisecond

// remote forwards a command for a session that runs on another host to
// that host's daemon, as a command row, and answers with its outcome. It
// reports whether it answered: false for this host's sessions (and ones
// that do not exist, which the local handler names).
func (sv *Server) remote(w http.ResponseWriter, r *http.Request, name, kind string, args map[string]string) bool {
	return sv.forward(w, r, "session", name, kind, args, func(tx store.Tx) (string, error) {
		s, err := tx.Session(name)
		return s.Host, err
	})
}

// remoteRole is remote for a role declared on another host: its daemon
// reconciles it (scale there re-arms its failed sessions too).
func (sv *Server) remoteRole(w http.ResponseWriter, r *http.Request, name, kind string, args map[string]string) bool {
	return sv.forward(w, r, "role", name, kind, args, func(tx store.Tx) (string, error) {
		ro, err := tx.Role(name)
		if ro.Placed() {
			// Any daemon writes a placed role: no one host owns it.
			return "", err
		}
		return ro.Host, err
	})
}

// forward sends command kind for the session or role name to the host
// owner reads, unless that is this host (or nobody: a role recorded before
// hosts were, or a row that does not exist, which the local handler names).
func (sv *Server) forward(w http.ResponseWriter, r *http.Request, what, name, kind string, args map[string]string, owner func(store.Tx) (string, error)) bool {
	var host string
	stale := false
	err := sv.st.Store().View(r.Context(), func(tx store.Tx) error {
		var err error
		if host, err = owner(tx); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				host = ""
				return nil
			}
			return err
		}
		f, err := sv.fleet(tx)
		stale = f.Stale(host)
		return err
	})
	if err != nil {
		fail(w, err)
		return true
	}
	if host == "" || host == sv.st.Host() {
		return false
	}
	if stale {
		reply(w, http.StatusServiceUnavailable, api.Error{Error: fmt.Sprintf(
			"%s %s: %s %s belongs to host %s, whose daemon is not answering (no heartbeat within %v); only it acts on it",
			kind, name, what, name, host, sv.o.Config.Fleet.HostTimeout)})
		return true
	}
	timeout := RemoteTimeout
	if v := r.URL.Query().Get("timeout"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 && d < timeout {
			timeout = d
		}
	}
	ctx, cancel := opCtx(r)
	defer cancel()
	res, err := commands.Submit(ctx, sv.st.Store(), herd.Command{
		Host: host, From: sv.st.Host(), Kind: kind, Session: name, Args: args,
	}, timeout, remotePoll)
	var te *commands.TimeoutError
	var fe *commands.FailedError
	switch {
	case errors.As(err, &te):
		reply(w, http.StatusGatewayTimeout, api.Error{Error: fmt.Sprintf("%s %s: %v", kind, name, err)})
	case errors.As(err, &fe):
		reply(w, http.StatusConflict, api.Error{Error: fmt.Sprintf("%s %s: %v", kind, name, err)})
	case err != nil:
		fail(w, err)
	default:
		reply(w, http.StatusOK, api.Result{Message: res + " (on host " + host + ")"})
	}
	return true
}

// Execute carries out a command another host's daemon wrote for one of
// this host's sessions, through the same paths as the API's own handlers.
func (sv *Server) Execute(ctx context.Context, c herd.Command) (string, error) {
	switch c.Kind {
	case herd.CommandStop:
		err := sv.o.Slots.Stop(ctx, slots.StopRequest{Name: c.Session, Reason: herd.ReasonUser, DropReplica: true,
			Message: "stopped by user (via host " + c.From + ")"})
		switch {
		case errors.Is(err, slots.ErrAlreadyStopped):
			return fmt.Sprintf("session %s already stopped", c.Session), nil
		case err != nil:
			return "", slots.Named("session", c.Session, err)
		}
		sv.o.Slots.Kick()
		return fmt.Sprintf("session %s stopped", c.Session), nil
	case herd.CommandResume:
		if err := sv.o.Slots.Resume(ctx, c.Session); err != nil {
			return "", slots.Named("session", c.Session, err)
		}
		return fmt.Sprintf("session %s resumed", c.Session), nil
	case herd.CommandArchive:
		if err := sv.o.Slots.Archive(ctx, c.Session); err != nil {
			return "", err
		}
		return fmt.Sprintf("session %s archived", c.Session), nil
	case herd.CommandScale:
		n, err := strconv.Atoi(c.Args["replicas"])
		if err != nil {
			return "", fmt.Errorf("scale %s: replicas %q is not a number", c.Session, c.Args["replicas"])
		}
		if err := sv.o.Slots.Scale(ctx, c.Session, n); err != nil {
			return "", err
		}
		return fmt.Sprintf("role %s scaled to %d", c.Session, n), nil
	case herd.CommandInject:
		enter, _ := strconv.ParseBool(c.Args["enter"])
		noClear, _ := strconv.ParseBool(c.Args["no_clear"]) // absent (an older daemon's row): clear
		return sv.inject(ctx, c.Session, c.Args["text"], enter, !noClear)
	}
	return "", fmt.Errorf("unknown command %q", c.Kind)
}

// clearInjector is a runtime that can empty the agent's input line
// before typing (tmux).
type clearInjector interface {
	InjectCleared(ctx context.Context, inc herd.Incarnation, clear []string, text string, enter bool) error
}

var _ clearInjector = (*tmux.Runtime)(nil)

// inject types text into a live tmux session of this host: into the pane
// herd launched for it, never whichever pane a user attached to it made
// active. With clear, the agent's clear keys (agents.ClearKeys of the
// role's agent) empty its input line first, so leftover text of an
// interrupted turn is not glued to the new prompt.
func (sv *Server) inject(ctx context.Context, name, text string, enter, clear bool) (string, error) {
	var s herd.Session
	var inc herd.Incarnation
	var role herd.Role
	err := sv.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if s, err = tx.Session(name); err != nil {
			return slots.Named("session", name, err)
		}
		if err := sv.local(s); err != nil {
			return err
		}
		if s.RuntimeKind != herd.RuntimeTmux || !s.State.Live() {
			return badf("inject: session %s is not a live tmux session (%s, %s)", name, s.RuntimeKind, s.State)
		}
		if role, err = tx.Role(s.Role); errors.Is(err, store.ErrNotFound) {
			err = nil // the role is gone: no agent known, nothing cleared
		}
		if err != nil {
			return err
		}
		inc, err = tx.Incarnation(s.Incarnation)
		return err
	})
	if err != nil {
		return "", err
	}
	var keys []string
	if clear && text != "" {
		// No text, nothing to glue to: an empty inject submits what is
		// on the input line.
		keys = agents.ClearKeys(role.Agent)
	}
	ctx, cancel := context.WithTimeout(ctx, sv.o.Config.Probe.Timeout*4)
	defer cancel()
	if c, ok := sv.o.Tmux.(clearInjector); ok {
		err = c.InjectCleared(ctx, inc, keys, text, enter)
	} else {
		keys = nil
		err = sv.o.Tmux.Inject(ctx, inc, text, enter)
	}
	if err != nil {
		return "", fmt.Errorf("inject: %w", err)
	}
	msg := fmt.Sprintf("%d bytes sent to %s", len(text), name)
	if len(keys) > 0 {
		msg += " (input line cleared first)"
	}
	return msg, nil
}
