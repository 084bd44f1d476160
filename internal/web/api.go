package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"strconv"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/frontdoor"
	"herd/internal/verbs"
	"herd/internal/web/ansi"
	"herd/internal/web/inbox"
)

// maxBody bounds a request body (a typed reply can be long, not huge).
const maxBody = 64 << 10

func replyJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func replyError(w http.ResponseWriter, code int, msg string) {
	replyJSON(w, code, api.Error{Error: msg})
}

// fail answers err with the status it maps to.
func fail(w http.ResponseWriter, err error) {
	replyError(w, statusOf(err), err.Error())
}

// statusOf is the HTTP status err maps to: a StatusError's own, else
// the front doors' one mapping (errs.HTTPStatus).
func statusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return errs.HTTPStatus(err)
}

func htmlEscape(s string) string { return html.EscapeString(s) }

// Whoami is what a page learns of its login.
type Whoami struct {
	Scope string `json:"scope"`
	// CSRF is the token to send in X-Herd-CSRF with every POST.
	CSRF string `json:"csrf"`
	Host string `json:"host"`
	// User is the user logged in, absent for the machine's token and
	// plain logins.
	User string `json:"user,omitempty"`
}

func (s *Server) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	replyJSON(w, http.StatusOK, Whoami{Scope: p.Scope, CSRF: p.CSRF, Host: s.o.Host, User: p.User})
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	raw, err := sessionsRaw(r.Context(), s.o.Backend)
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	raw, err := s.o.Backend.Session(r.Context(), r.PathValue("name"))
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

// Screen is a session's screen, rendered.
type Screen struct {
	// HTML is the screen with its colours as spans, every byte of the
	// agent's escaped.
	HTML string `json:"html"`
	// Segments are the same runs as data; the session page renders them
	// as text nodes.
	Segments []ansi.Segment `json:"segments"`
}

// screenLines is how much of a pane or output the session page shows.
const screenLines = 60

func (s *Server) handleScreen(w http.ResponseWriter, r *http.Request) {
	text, err := s.o.Backend.Screen(r.Context(), r.PathValue("name"), screenLines, true)
	if err != nil {
		fail(w, err)
		return
	}
	replyJSON(w, http.StatusOK, Screen{HTML: ansi.ANSIToHTML(text), Segments: ansi.Segments(text)})
}

// inbox reads the sessions and what is known of each that needs a person.
func (s *Server) inbox(ctx context.Context, only string) ([]inbox.Item, error) {
	_, views, err := s.o.Backend.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	agents, err := s.o.Backend.Agents(ctx)
	if err != nil {
		return nil, err
	}
	clues := map[string]inbox.Clue{}
	keep := views[:0:0]
	for _, v := range views {
		if only != "" && v.Name != only {
			continue
		}
		keep = append(keep, v)
		if !inbox.Needs(v) {
			continue
		}
		c := inbox.Clue{Agent: agents[v.Role]}
		if v.State.Live() {
			if evs, err := s.o.Backend.Events(ctx, EventQuery{Session: v.Name, Kind: herd.EventActivity, Limit: 1}); err == nil && len(evs) == 1 {
				c.Cause = &evs[0]
			}
			if v.Activity == herd.ActivityWaiting && v.RuntimeKind == herd.RuntimeTmux {
				c.Screen = s.dialogScreen(ctx, v.Name)
			}
		}
		clues[v.Name] = c
	}
	items := inbox.Derive(keep, clues)
	out := items[:0]
	s.mu.Lock()
	for _, it := range items {
		if a, ok := s.answered[it.Session]; ok && covers(a, it) {
			continue
		}
		out = append(out, it)
	}
	s.mu.Unlock()
	return out, nil
}

// screenTTL is how long a waiting session's screen read for the inbox
// is reused: every browser's inbox refresh must not capture every pane.
const screenTTL = time.Second

// cachedScreen is a screen read for the inbox.
type cachedScreen struct {
	text string
	at   time.Time
}

// dialogScreen returns the end of a waiting session's screen, read at most
// once per screenTTL.
func (s *Server) dialogScreen(ctx context.Context, name string) string {
	s.mu.Lock()
	c, ok := s.screens[name]
	s.mu.Unlock()
	if ok && time.Since(c.at) < screenTTL {
		return c.text
	}
	text, err := s.o.Backend.Screen(ctx, name, 40, false)
	if err != nil {
		return ""
	}
	s.mu.Lock()
	for k, v := range s.screens {
		if time.Since(v.at) > time.Minute {
			delete(s.screens, k)
		}
	}
	s.screens[name] = cachedScreen{text: text, at: time.Now()}
	s.mu.Unlock()
	return text
}

func (s *Server) handleInbox(w http.ResponseWriter, r *http.Request) {
	items, err := s.inbox(r.Context(), "")
	if err != nil {
		fail(w, err)
		return
	}
	replyJSON(w, http.StatusOK, items)
}

// handleEvents streams server-sent events: each new event of the log as
// one JSON object (the default message), and a "sessions" message when
// the fleet changed.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		replyError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	release, err := s.limits.streams.Open(r.RemoteAddr)
	if err != nil {
		if ok, unlogged := s.limits.streamsRefused.Allow(); ok {
			s.log.Warn("web: event stream refused", "remote", r.RemoteAddr, "err", err, "refused_unlogged", unlogged)
		}
		replyError(w, http.StatusTooManyRequests, err.Error())
		return
	}
	defer release()
	frontdoor.Stream(w)
	c, cancel := s.changes.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// What changed between the page's first reads and this subscription
	// is not streamed: the page is told to read again once, now.
	io.WriteString(w, "retry: 1000\n\nevent: sessions\ndata: {}\n\n")
	fl.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	// A user's stream lasts while the user does: checked again on its
	// own clock, it ends once the user is removed (or cannot be
	// checked), as their next request would be refused.
	var recheck <-chan time.Time
	if principal(r).User != "" {
		t := time.NewTicker(s.limits.recheck)
		defer t.Stop()
		recheck = t.C
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-recheck:
			if _, err := s.auth.Authenticate(r); err != nil {
				s.log.Info("web: event stream of a user ended", "user", principal(r).User, "remote", r.RemoteAddr, "err", err)
				return
			}
			continue
		case <-keep.C:
			io.WriteString(w, ": keep-alive\n\n")
		case ch := <-c:
			if ch.Event != nil {
				fmt.Fprintf(w, "id: %d\ndata: %s\n\n", ch.Event.ID, marshal(ch.Event))
			}
			if ch.Sessions {
				io.WriteString(w, "event: sessions\ndata: {}\n\n")
			}
		}
		fl.Flush()
	}
}

// decode reads a JSON request body into v: one JSON value and nothing
// after it but space (a second value would be dropped unread); a body
// over maxBody is 413.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("unexpected data after the JSON value")
			if errors.As(terr, new(*http.MaxBytesError)) {
				err = terr
			}
		}
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &StatusError{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body over %d bytes", tooLarge.Limit)}
	case err != nil:
		return errs.Badf("bad request body: %v", err)
	}
	return nil
}

// origin describes where a console request came from, for events.
func origin(r *http.Request) string {
	return principal(r).Who + " from " + r.RemoteAddr
}

// record appends a console event, logging a failure (the action is done
// either way).
func (s *Server) record(ctx context.Context, session, inc, kind, reason, msg string, data map[string]any) {
	if s.o.Events == nil {
		return
	}
	e := herd.Event{Time: time.Now().UTC(), Host: s.o.Host, Session: session, Incarnation: inc, Kind: kind, Reason: reason, Message: msg, Data: data}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.o.Events.Record(ctx, e); err != nil {
		s.log.Warn("web: event not recorded", "session", session, "kind", kind, "err", err)
	}
}

// InputRequest types into a session: text (then Enter unless NoEnter),
// or one named key; not both.
type InputRequest struct {
	Text    string `json:"text"`
	NoEnter bool   `json:"no_enter"`
	// Multiline lets Text hold line breaks, pasted as one input; without
	// it, a line break in Text is 400.
	Multiline bool   `json:"multiline"`
	Key       string `json:"key"`
}

// keys are the named keys the session page offers, as the bytes a
// terminal sends.
var keys = map[string]string{
	"enter": "", "esc": "\x1b", "up": "\x1b[A", "down": "\x1b[B", "right": "\x1b[C", "left": "\x1b[D",
	"ctrl-c": "\x03", "tab": "\t", "1": "1", "2": "2", "3": "3",
}

func (s *Server) handleInput(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var in InputRequest
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	req := verbs.InjectRequest{Name: name, Text: in.Text, Enter: !in.NoEnter, Multiline: in.Multiline}
	what := "text"
	if in.Key != "" && in.Text != "" {
		replyError(w, http.StatusBadRequest, `input: give "text" or "key", not both`)
		return
	}
	if in.Key != "" {
		b, ok := keys[in.Key]
		if !ok {
			replyError(w, http.StatusBadRequest, fmt.Sprintf("unknown key %q", in.Key))
			return
		}
		req = verbs.InjectRequest{Name: name, Text: b, Enter: in.Key == "enter", NoClear: true}
		what = "key " + in.Key
	}
	res, err := s.o.Verbs.Inject(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	s.record(r.Context(), name, "", herd.EventConsole, "input", fmt.Sprintf("%s typed by %s", what, origin(r)),
		map[string]any{"who": principal(r).Who, "by": principal(r).By(), "from": r.RemoteAddr, "key": in.Key, "bytes": len(in.Text)})
	replyJSON(w, http.StatusOK, res)
}

// VerbRequest carries a verb's options.
type VerbRequest struct {
	Grace string `json:"grace"`
}

func (s *Server) handleVerb(w http.ResponseWriter, r *http.Request) {
	name, verb := r.PathValue("name"), r.PathValue("verb")
	var in VerbRequest
	if r.ContentLength != 0 {
		if err := decode(r, &in); err != nil {
			fail(w, err)
			return
		}
	}
	ctx := r.Context()
	var (
		res any
		err error
	)
	switch verb {
	case "stop":
		res, err = s.o.Verbs.Stop(ctx, verbs.StopRequest{Name: name, Grace: in.Grace})
	case "restart":
		res, err = s.o.Verbs.Restart(ctx, verbs.RestartRequest{Name: name, Grace: in.Grace})
	case "resume":
		res, err = s.o.Verbs.Resume(ctx, verbs.SessionRequest{Name: name})
	case "reset":
		res, err = s.o.Verbs.Reset(ctx, verbs.SessionRequest{Name: name})
	case "archive":
		res, err = s.o.Verbs.Archive(ctx, verbs.SessionRequest{Name: name})
	default:
		replyError(w, http.StatusNotFound, "no verb "+strconv.Quote(verb))
		return
	}
	if err != nil {
		fail(w, err)
		return
	}
	s.record(ctx, name, "", herd.EventConsole, verb, fmt.Sprintf("%s by %s", verb, origin(r)),
		map[string]any{"who": principal(r).Who, "by": principal(r).By(), "from": r.RemoteAddr, "verb": verb})
	replyJSON(w, http.StatusOK, res)
}
