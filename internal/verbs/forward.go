package verbs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"herd"
	"herd/internal/commands"
	"herd/internal/errs"
	"herd/internal/store"
)

// RemoteTimeout is how long a verb for another host's session or role
// waits for that host's daemon (a stop's grace period on top).
const RemoteTimeout = 30 * time.Second

// HostDownError is a verb for a session or role of a host whose daemon is
// not answering: only that daemon acts on it, so nothing is queued.
type HostDownError struct {
	Kind, What, Name, Host string
	After                  time.Duration
}

func (e *HostDownError) Error() string {
	return fmt.Sprintf("%s %s: %s %s belongs to host %s, whose daemon is not answering (no heartbeat within %v); only it acts on it",
		e.Kind, e.Name, e.What, e.Name, e.Host, e.After)
}

// ErrKind: the host that must act is unavailable.
func (e *HostDownError) ErrKind() errs.Kind { return errs.Unavailable }

// sessionHost returns the host whose daemon carries out a verb on session
// name: "" for this host, for a session that does not exist (the verb
// names it), and for a verb forwarded here (from is set: it never
// travels twice; the slots refuse another host's session).
func (v *Verbs) sessionHost(ctx context.Context, name, from string) (string, error) {
	if from != "" {
		return "", nil
	}
	s, err := v.o.Reader.Session(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil || s.Host == v.o.Host {
		return "", err
	}
	return s.Host, nil
}

// roleHost is sessionHost for a role: the host that declared it. A
// placed role has no one owner (any daemon writes it): "".
func (v *Verbs) roleHost(ctx context.Context, name, from string) (string, error) {
	if from != "" {
		return "", nil
	}
	ro, err := v.o.Reader.Role(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil || ro.Placed() || ro.Host == v.o.Host {
		return "", err
	}
	return ro.Host, nil
}

// resulter is a verb's result: a Result and what it adds.
type resulter[T any] interface {
	*T
	base() *Result
}

// forward sends verb kind on name (a session, or a role when what says so)
// to host's daemon, which executes it through Execute, and returns its
// result, marked with the host. It waits up to timeout; a host whose
// daemon is stale is refused at once.
func forward[T any, P resulter[T]](ctx context.Context, v *Verbs, host, kind, what, name string, args map[string]string, timeout time.Duration) (T, error) {
	var out T
	stale, err := v.o.Reader.Stale(ctx, host)
	if err != nil {
		return out, err
	}
	if stale {
		return out, &HostDownError{Kind: kind, What: what, Name: name, Host: host, After: v.o.HostTimeout}
	}
	if timeout > commands.ExecTimeout {
		if args == nil {
			args = map[string]string{}
		}
		args[commands.ArgExecTimeout] = timeout.String()
	}
	ctx, cancel := detach(ctx, timeout+time.Minute)
	defer cancel()
	res, err := v.o.Forward.Forward(ctx, herd.Command{Host: host, From: v.o.Host, Kind: kind, Session: name, Args: args}, timeout)
	if err != nil {
		return out, fmt.Errorf("%s %s: %w", kind, name, err)
	}
	b := P(&out).base()
	if strings.HasPrefix(res, "{") && json.Unmarshal([]byte(res), &out) == nil {
		// A structured result.
	} else {
		b.Message = res // a message (and an older daemon's answer)
	}
	b.Message += " (on host " + host + ")"
	b.Host = host
	return out, nil
}

// encode is what Execute answers: the message of a plain Result, JSON of
// a structured one.
func encode[T any](res T, err error) (string, error) {
	if err != nil {
		return "", err
	}
	if r, ok := any(res).(Result); ok {
		return r.Message, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return "", fmt.Errorf("verbs: encode result: %w", err)
	}
	return string(b), nil
}

// Execute carries out a verb another host's daemon forwarded for one of
// this host's sessions or roles: the very function a local caller runs.
func (v *Verbs) Execute(ctx context.Context, c herd.Command) (string, error) {
	a, from := c.Args, c.From
	if from == "" {
		from = "?" // never forwarded again
	}
	switch c.Kind {
	case herd.CommandStop:
		return encode(v.Stop(ctx, StopRequest{Name: c.Session, Grace: a["grace"], From: from}))
	case herd.CommandResume:
		return encode(v.Resume(ctx, SessionRequest{Name: c.Session, From: from}))
	case herd.CommandArchive:
		return encode(v.Archive(ctx, SessionRequest{Name: c.Session, From: from}))
	case herd.CommandInject:
		return encode(v.Inject(ctx, injectRequest(c.Session, a, from)))
	case herd.CommandAnswer:
		return encode(v.Answer(ctx, answerRequest(c.Session, a, from)))
	case herd.CommandRestart:
		return encode(v.Restart(ctx, RestartRequest{Name: c.Session, Grace: a["grace"], From: from}))
	case herd.CommandReset:
		return encode(v.Reset(ctx, SessionRequest{Name: c.Session, From: from}))
	case herd.CommandSignal:
		return encode(v.Signal(ctx, SignalRequest{Name: c.Session, Signal: a["signal"], From: from}))
	case herd.CommandScale:
		n, err := parseInt(a["replicas"])
		if err != nil {
			return "", fmt.Errorf("scale %s: replicas %q is not a number", c.Session, a["replicas"])
		}
		return encode(v.Scale(ctx, ScaleRequest{Role: c.Session, Replicas: n, From: from}))
	case herd.CommandDeleteRole:
		return encode(v.DeleteRole(ctx, RoleRequest{Role: c.Session, From: from}))
	case herd.CommandRollout:
		return encode(v.Rollout(ctx, rolloutRequest(c.Session, a, from)))
	}
	return "", fmt.Errorf("unknown command %q", c.Kind)
}
