package verbs

import (
	"context"
	"errors"
	"time"

	"herd"
)

// AnswerRequest answers a session's need (a dialog's option, or words),
// as the console's inbox does.
type AnswerRequest struct {
	Name   string
	Option string
	Text   string
	// Since is the need's start as the answerer saw it: an answer to a
	// need that is no longer the session's is refused.
	Since time.Time
	// Who names the answerer (login, and where from) in the answered
	// event.
	Who string
	// By is the person who answers (the event's data.by): a user's
	// name, else the login.
	By string
	// From is the host that forwarded the answer, "" when asked here.
	From string
}

// Answerer answers a need of one of this host's sessions, once: one
// answer at a time per session, each checked against the need's since.
type Answerer interface {
	Answer(ctx context.Context, req AnswerRequest) (Result, error)
}

// ErrNoConsole is an answer for a host whose daemon serves no console.
var ErrNoConsole = errors.New("answer: this host's daemon serves no console ([web] listen)")

// Answer answers a need of session req.Name. Another host's session is
// answered by its own daemon (forwarded), whose per-session lock and
// since check decide between two answers from two consoles: exactly one
// is delivered.
func (v *Verbs) Answer(ctx context.Context, req AnswerRequest) (Result, error) {
	if host, err := v.sessionHost(ctx, req.Name, req.From); err != nil || host != "" {
		if err != nil {
			return Result{}, err
		}
		args := map[string]string{"option": req.Option, "text": req.Text, "who": req.Who, "by": req.By}
		if !req.Since.IsZero() {
			args["since"] = req.Since.UTC().Format(time.RFC3339Nano)
		}
		return forward[Result](ctx, v, host, herd.CommandAnswer, "session", req.Name, args, RemoteTimeout)
	}
	if v.Answerer == nil {
		return Result{}, ErrNoConsole
	}
	return v.Answerer.Answer(ctx, req)
}

// answerRequest is a forwarded answer's request.
func answerRequest(name string, a map[string]string, from string) AnswerRequest {
	req := AnswerRequest{Name: name, Option: a["option"], Text: a["text"], Who: a["who"], By: a["by"], From: from}
	if t, err := time.Parse(time.RFC3339Nano, a["since"]); err == nil {
		req.Since = t
	}
	return req
}
