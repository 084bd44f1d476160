package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"herd"
	"herd/internal/errs"
	"herd/internal/guard"
	"herd/internal/runtime/execrt"
	"herd/internal/store"
)

// logOptions are the query of a logs request.
type logOptions struct {
	tail  int
	since time.Duration // 0: the current incarnation only
	// escapes keeps a pane's colours as SGR escape sequences (?escapes=1,
	// the console's screen); plain text otherwise.
	escapes bool
}

// escapeCapturer captures a pane with its colours as escape sequences.
type escapeCapturer interface {
	CaptureEscapes(ctx context.Context, inc herd.Incarnation, lines int) ([]byte, error)
}

func parseLogOptions(r *http.Request) (logOptions, error) {
	var o logOptions
	q := r.URL.Query()
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, badf("logs: --tail %q: want 0 (everything) or more lines", v)
		}
		o.tail = n
	}
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, badf("logs: --since %q: want a positive duration such as 1h", v)
		}
		o.since = d
	}
	o.escapes, _ = strconv.ParseBool(q.Get("escapes"))
	return o, nil
}

// handleFleetLogs serves the logs of every session of a role (?role=) or
// of every session (?all=1), each line prefixed with its session's name.
func (sv *Server) handleFleetLogs(w http.ResponseWriter, r *http.Request) {
	role := r.URL.Query().Get("role")
	all, _ := strconv.ParseBool(r.URL.Query().Get("all"))
	if role == "" && !all {
		fail(w, badf("logs: give a session NAME, --role NAME or --all"))
		return
	}
	if p, c, confined := sv.caller(r); confined && role != "" && !sv.permit(w, r, p, c, "read_output", guard.Target{Role: role}) {
		return
	}
	sv.serveLogs(w, r, "", role, all)
}

// serveLogs writes the output of one session (name), or of every session
// of role or of all, prefixed by session name.
func (sv *Server) serveLogs(w http.ResponseWriter, r *http.Request, name, role string, all bool) {
	o, err := parseLogOptions(r)
	if err != nil {
		fail(w, err)
		return
	}
	var sessions []herd.Session
	err = sv.st.Store().View(r.Context(), func(tx store.Tx) error {
		if name != "" {
			s, err := tx.Session(name)
			if err != nil {
				return errs.Named("session", name, err)
			}
			sessions = []herd.Session{s}
			return nil
		}
		if role != "" {
			if _, err := tx.Role(role); err != nil {
				return errs.Named("role", role, err)
			}
		}
		list, err := tx.Sessions()
		for _, s := range list {
			if all || s.Role == role {
				sessions = append(sessions, s)
			}
		}
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	var out bytes.Buffer
	for _, s := range sessions {
		b, err := sv.sessionLogs(r.Context(), s, o)
		if err != nil {
			if name != "" {
				fail(w, err)
				return
			}
			b = []byte(fmt.Sprintf("herd: %v\n", err))
		}
		if name != "" {
			out.Write(b)
			continue
		}
		for _, line := range splitLines(b) {
			fmt.Fprintf(&out, "%s | %s\n", s.Name, line)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(out.Bytes())
}

// sessionLogs returns a session's output: its current incarnation's (the
// whole tmux scrollback, or the captured stdout of an exec agent), or,
// with since, that of every incarnation that ran in the window, oldest
// first, each under a header line. A launch that failed, or a command
// not found, ends with herd's line saying why.
func (sv *Server) sessionLogs(ctx context.Context, s herd.Session, o logOptions) ([]byte, error) {
	if o.since <= 0 {
		b, err := sv.incarnationOutput(ctx, s, s.Incarnation, o)
		if err != nil {
			return nil, err
		}
		return append(b, failureLine(s.Exit)...), nil
	}
	incs, err := sv.incarnationsSince(ctx, s, time.Now().Add(-o.since))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, inc := range incs {
		fmt.Fprintf(&out, "--- incarnation %s, started %s", inc.ID, inc.StartedAt.Local().Format(time.DateTime))
		if inc.Exit != nil {
			fmt.Fprintf(&out, ", ended %s", exitText(*inc.Exit))
		}
		out.WriteString(" ---\n")
		b, err := sv.incarnationOutput(ctx, s, inc.ID, o)
		if err != nil {
			fmt.Fprintf(&out, "herd: %v\n", err)
		}
		out.Write(b)
		if inc.Exit != nil {
			out.WriteString(failureLine(inc.Exit))
		}
	}
	return out.Bytes(), nil
}

// incarnationOutput is the output of incarnation inc of s: the live pane
// (all of its history) when it is s's current, live tmux incarnation; the
// captured stdout of an exec incarnation; nothing for a tmux incarnation
// whose pane is gone.
func (sv *Server) incarnationOutput(ctx context.Context, s herd.Session, inc string, o logOptions) ([]byte, error) {
	tail := o.tail
	if inc == "" {
		return nil, nil
	}
	var rec herd.Incarnation
	err := sv.st.Store().View(ctx, func(tx store.Tx) (err error) {
		rec, err = tx.Incarnation(inc)
		return err
	})
	if err != nil {
		return nil, nil // never launched (a failed launch is recorded, so rare)
	}
	if rec.RuntimeKind == herd.RuntimeTmux {
		if inc != s.Incarnation || !s.State.Live() {
			return nil, nil
		}
		if ec, ok := sv.o.Tmux.(escapeCapturer); ok && o.escapes {
			out, err := ec.CaptureEscapes(ctx, rec, tail)
			return tailLines(out, tail), err
		}
		out, err := sv.o.Tmux.Capture(ctx, rec, tail)
		return tailLines(out, tail), err
	}
	outPath, _ := sv.o.Exec.Paths(s.Name, inc)
	return execrt.ReadTail(outPath, tail)
}

// incarnationsSince lists the incarnations of s that ran after t: those
// launched since (from the event log) and the one running at t.
func (sv *Server) incarnationsSince(ctx context.Context, s herd.Session, t time.Time) ([]herd.Incarnation, error) {
	var out []herd.Incarnation
	err := sv.st.Store().View(ctx, func(tx store.Tx) error {
		events, err := tx.Events(store.EventFilter{Session: s.Name, Since: t})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		add := func(id string) {
			if id == "" || seen[id] {
				return
			}
			seen[id] = true
			if inc, err := tx.Incarnation(id); err == nil && inc.Session == s.Name &&
				(inc.EndedAt == nil || inc.EndedAt.After(t)) {
				out = append(out, inc)
			}
		}
		why := map[string]string{} // a failed launch's message, by incarnation
		for _, e := range events {
			add(e.Incarnation)
			if e.Kind == herd.EventExited && e.Reason == herd.ReasonLaunchFailed {
				why[e.Incarnation] = e.Message
			}
		}
		add(s.Incarnation)
		for i := range out {
			if m, ok := why[out[i].ID]; ok && out[i].Exit != nil && out[i].Exit.Message == "" {
				out[i].Exit.Message = m
			}
		}
		return nil
	})
	// Oldest first: ids are time-ordered, start times may tie.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].StartedAt.Before(out[j-1].StartedAt); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, err
}

// failureLine is herd's own line under a session's output when its agent
// never ran: a launch that failed, or a shell's "command not found" (127)
// or "not executable" (126) exit; "" otherwise.
func failureLine(e *herd.Exit) string {
	if e == nil {
		return ""
	}
	switch {
	case e.Reason == herd.ReasonLaunchFailed:
		msg := e.Message
		if msg == "" {
			msg = "see herd events --kind crashed"
		}
		return fmt.Sprintf("herd: launch failed: %s\n", msg)
	case e.Code != nil && *e.Code == 127:
		return "herd: the agent exited with code 127: command not found\n"
	case e.Code != nil && *e.Code == 126:
		return "herd: the agent exited with code 126: command not executable\n"
	}
	return ""
}

// exitText says how an incarnation ended, in a few words.
func exitText(e herd.Exit) string {
	switch {
	case e.Signal != nil:
		return fmt.Sprintf("signal %d (%s)", *e.Signal, e.Reason)
	case e.Code != nil:
		return fmt.Sprintf("code %d (%s)", *e.Code, e.Reason)
	}
	return e.Reason
}
