package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/runtime"
	"herd/internal/store"
	"herd/internal/verbs"
	"herd/internal/web/inbox"
)

// AnswerRequest answers one inbox item: one of its options, or free text.
type AnswerRequest struct {
	Option string `json:"option"`
	Text   string `json:"text"`
	// Since is the item's since as the inbox showed it: an answer to a
	// need that is no longer the session's is refused. Zero: whatever the
	// session waits for now.
	Since time.Time `json:"since"`

	// nonce is the answer link's that carries the answer, "" otherwise.
	nonce string
}

// AnswerResult says what an answer did.
type AnswerResult struct {
	Message string `json:"message"`
}

// lock returns session name's answer lock.
func (s *Server) lock(name string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.locks[name]
	if !ok {
		l = &sync.Mutex{}
		s.locks[name] = l
	}
	return l
}

// AlreadyAnswered is the reply to an answer that came too late.
const AlreadyAnswered = "already answered"

// AnsweredError refuses an answer to a need someone answered already.
type AnsweredError struct {
	// Who answered it, and when.
	Who string
	At  time.Time
}

func (e *AnsweredError) Error() string {
	return AlreadyAnswered + " by " + e.Who + " at " + e.At.UTC().Format(time.RFC3339)
}

// AnswerConflict is the body of a 409 to an answer: the error, and who
// answered the need first and when, when known.
type AnswerConflict struct {
	Error      string     `json:"error"`
	AnsweredBy string     `json:"answered_by,omitempty"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
}

func (s *Server) handleAnswer(w http.ResponseWriter, r *http.Request) {
	var in AnswerRequest
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	p := principal(r)
	res, code, err := s.answer(r.Context(), r.PathValue("name"), in, answerer{who: p.Who, by: p.By(), from: r.RemoteAddr})
	var ae *AnsweredError
	switch {
	case errors.As(err, &ae):
		at := ae.At.UTC()
		replyJSON(w, code, AnswerConflict{Error: err.Error(), AnsweredBy: ae.Who, AnsweredAt: &at})
	case err != nil:
		replyError(w, code, err.Error())
	default:
		replyJSON(w, http.StatusOK, res)
	}
}

// answerer names who answers, in the answered event.
type answerer struct {
	// who is the login ("alice (browser:ab12cd34)", "token", "link:…").
	who string
	// by is the person (data.by): a user's name, else the login.
	by string
	// from is where the answer came from (an address, another host).
	from string
}

// answer types an answer into session name's need, once: the one path of
// every answer (the inbox's buttons and replies, a notification's answer
// link). a names the answerer in the answered event. On error, code is
// the HTTP status it maps to.
func (s *Server) answer(ctx context.Context, name string, in AnswerRequest, a answerer) (AnswerResult, int, error) {
	who, from := a.who, a.from
	if (in.Option == "") == (in.Text == "") {
		return AnswerResult{}, http.StatusBadRequest, errors.New(`answer: give "option" or "text"`)
	}
	if verbs.CheckText(in.Text, false) != nil {
		// Before anything is typed: a permission dialog's Esc must not
		// go without the words that explain it.
		return AnswerResult{}, http.StatusBadRequest, errors.New("answer: the reply holds a line break, which would press Enter mid-reply: reply in one line")
	}
	if host := s.hostOf(ctx, name); host != "" && host != s.o.Host {
		// Another host's session: its daemon's console decides, under its
		// lock and since check, between this answer and any other.
		res, err := s.o.Verbs.Answer(ctx, verbs.AnswerRequest{Name: name, Option: in.Option, Text: in.Text, Since: in.Since, Who: who + " from " + from, By: a.by})
		if err != nil {
			return AnswerResult{}, statusOf(err), err
		}
		if s.hub != nil {
			s.hub.publish(Change{Sessions: true})
		}
		return AnswerResult{Message: res.Message}, http.StatusOK, nil
	}
	// One answer at a time per session: the second of two people sees
	// the first's answer recorded, and is told.
	l := s.lock(name)
	l.Lock()
	defer l.Unlock()
	items, err := s.inbox(ctx, name)
	if err != nil {
		return AnswerResult{}, statusOf(err), err
	}
	if len(items) == 0 || (!in.Since.IsZero() && !items[0].Since.Equal(in.Since)) {
		return AnswerResult{}, http.StatusConflict, s.gone(name, len(items) == 0)
	}
	it := items[0]
	req := verbs.InjectRequest{Name: name, Text: in.Text, Enter: true}
	what := "text"
	if in.Option != "" {
		i := slices.IndexFunc(it.Options, func(o inbox.Option) bool { return o.Key == in.Option })
		if i < 0 {
			return AnswerResult{}, http.StatusBadRequest, fmt.Errorf("answer: %s offers no option %q", name, in.Option)
		}
		what = "option " + it.Options[i].Label
		req = optionInput(it, in.Option)
	}
	// The need is claimed before anything is typed: of two answers to
	// it, before and after a restart of the daemon, one is typed.
	now := time.Now().UTC()
	rec := store.Answer{Session: name, Since: it.Since, Incarnation: it.Incarnation, Who: who, Choice: what, Nonce: in.nonce,
		At: now, Expires: now.Add(AnswerTTL)}
	prior, ok, err := s.answers.ClaimAnswer(ctx, rec)
	if err != nil {
		return AnswerResult{}, http.StatusServiceUnavailable, fmt.Errorf("answer: %s: nothing typed: %w", name, err)
	}
	if !ok {
		s.remember(prior)
		return AnswerResult{}, http.StatusConflict, &AnsweredError{Who: prior.Who, At: prior.At}
	}
	res, err := s.typeAnswer(ctx, it, in, req)
	if err != nil && mayHaveTyped(err) {
		// Typed, but the agent was not seen taking it (a slow agent on a
		// busy machine): it may have. The claim stays, so that nobody's
		// second answer is typed after it; the person looks at the
		// screen (the session's page types into its input line).
		s.remember(rec)
		s.record(ctx, name, it.Incarnation, herd.EventAnswered, it.Kind, fmt.Sprintf("%s answered by %s from %s, typed but not seen taken: %v", what, who, from, err),
			map[string]any{"who": who, "by": a.by, "from": from, "kind": it.Kind, "option": in.Option, "text": in.Text, "question": inbox.Clip(it.Text, 500), "unconfirmed": true})
		return AnswerResult{}, http.StatusBadGateway, fmt.Errorf("answer: %s: typed, but the agent was not seen taking it (%w): look at its screen; a second answer to this need is refused", name, err)
	}
	if err != nil {
		// The answer did not reach the agent: its need is still open.
		if rerr := s.answers.ReleaseAnswer(context.WithoutCancel(ctx), name, it.Since); rerr != nil {
			s.log.Warn("web: answer not typed, and its record not released", "session", name, "err", rerr)
		}
		return AnswerResult{}, statusOf(err), err
	}
	s.remember(rec)
	s.record(ctx, name, it.Incarnation, herd.EventAnswered, it.Kind, fmt.Sprintf("%s answered by %s from %s", what, who, from),
		map[string]any{"who": who, "by": a.by, "from": from, "kind": it.Kind, "option": in.Option, "text": in.Text, "question": inbox.Clip(it.Text, 500)})
	if s.hub != nil {
		s.hub.publish(Change{Sessions: true}) // the item is gone now, not at the next poll
	}
	return AnswerResult{Message: res.Message}, http.StatusOK, nil
}

// mayHaveTyped reports whether an answer that failed with err may have
// reached the agent: its text stayed on the input line after Enter, or
// the typing ran out of time under way.
func mayHaveTyped(err error) bool {
	return errors.Is(err, runtime.ErrNotSubmitted) || errors.Is(err, context.DeadlineExceeded)
}

// typeAnswer types req, item it's answer; a reply in words to a known
// agent's permission dialog declines the dialog first.
func (s *Server) typeAnswer(ctx context.Context, it inbox.Item, in AnswerRequest, req verbs.InjectRequest) (verbs.Result, error) {
	if in.Text != "" && it.Kind == inbox.KindPermission && knownAgent(it.Agent) {
		// A reply in words to a permission dialog declines it first
		// (Esc: "No, and tell the agent what to do differently"), then
		// types the words to the agent's prompt.
		if _, err := s.o.Verbs.Inject(ctx, verbs.InjectRequest{Name: it.Session, Text: "\x1b", NoClear: true}); err != nil {
			return verbs.Result{}, err
		}
		// The words wait until the dialog has left the screen: keys that
		// reach the agent in the same read as the Esc are taken for an
		// Alt key, the dialog stays, and the reply's Enter would confirm
		// its preselected "Yes".
		if err := s.awaitDialogClosed(ctx, it); err != nil {
			return verbs.Result{}, err
		}
	}
	return s.o.Verbs.Inject(ctx, req)
}

// dialogCloseWait bounds the wait for a permission dialog to leave the
// screen after its Esc, counted by the reads that succeed: a read at
// least this long after the Esc that still shows the dialog ends it.
// screenReadWait bounds the wait for a read that succeeds at all: on a
// machine so busy that tmux does not answer within the call timeout, a
// failed read says nothing of the dialog, and a 409 then would lose the
// words of a refusal the Esc has already made. dialogLook is how often
// the screen is read.
const (
	dialogCloseWait = 3 * time.Second
	screenReadWait  = 15 * time.Second
	dialogLook      = 100 * time.Millisecond
)

// awaitDialogClosed reads it's session's screen until its agent's
// permission dialog is gone and the turn it was part of has ended
// (agents.ClassifyScreen: no dialog, nothing running): words typed while
// the interrupted turn still runs are queued by Codex, and put back on
// its input line when the interruption lands, where a second Enter sends
// them again. A read at least dialogCloseWait after the start that still
// shows either, or no read that succeeds for screenReadWait, is a 409,
// nothing typed.
func (s *Server) awaitDialogClosed(ctx context.Context, it inbox.Item) error {
	start := time.Now()
	for {
		screen, err := s.o.Backend.Screen(ctx, it.Session, 60, false)
		sc := agents.ClassifyScreen(it.Agent, screen)
		if err == nil && sc.Dialog == "" && !sc.Running {
			return nil
		}
		why := ""
		switch waited := time.Since(start); {
		case err == nil && sc.Dialog != "" && waited >= dialogCloseWait:
			why = "its permission dialog is still on the screen"
		case err == nil && waited >= dialogCloseWait:
			why = "the turn the dialog was part of still runs"
		case err != nil && waited >= screenReadWait:
			why = "its screen cannot be read: " + err.Error()
		}
		if why != "" {
			return &StatusError{Code: http.StatusConflict, Message: fmt.Sprintf(
				"the dialog did not close after Esc (%s); the reply was not typed: answer it on its host (herd attach %s)", why, it.Session)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(dialogLook):
		}
	}
}

// gone is the refusal of an answer whose need the inbox no longer shows
// (none: nothing; else another since): who answered last and when, where
// known.
func (s *Server) gone(name string, none bool) error {
	if a, ok := s.lastAnswer(name); ok {
		return &AnsweredError{Who: a.Who, At: a.At}
	}
	if none {
		return errors.New("session " + name + " waits for nothing a person can answer now")
	}
	return errors.New(AlreadyAnswered)
}

// remember keeps a as its session's last answer, for the inbox.
func (s *Server) remember(a store.Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.answered[a.Session]; !ok || !a.At.Before(last.At) {
		s.answered[a.Session] = a
	}
}

// lastAnswer is the last answer remembered of session name.
func (s *Server) lastAnswer(name string) (store.Answer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answered[name]
	return a, ok
}

// loadAnswers remembers the answers recorded and not expired, so that
// the inbox of a restarted console leaves the needs answered out.
func (s *Server) loadAnswers(ctx context.Context) {
	all, err := s.answers.RecentAnswers(ctx, time.Now())
	if err != nil {
		s.log.Warn("web: answers recorded before this start not read", "err", err)
		return
	}
	for _, a := range all {
		s.remember(a)
	}
}

// hostOf is the host of session name, "" when it is not listed.
func (s *Server) hostOf(ctx context.Context, name string) string {
	_, views, err := s.o.Backend.Sessions(ctx)
	if err != nil {
		return ""
	}
	for _, v := range views {
		if v.Name == name {
			return v.Host
		}
	}
	return ""
}

var _ verbs.Answerer = (*Server)(nil)

// Answer implements verbs.Answerer: an answer another host's console
// forwarded for one of this host's sessions takes the one answer path.
func (s *Server) Answer(ctx context.Context, req verbs.AnswerRequest) (verbs.Result, error) {
	by := req.By
	if by == "" {
		by = req.Who // from a daemon that did not say
	}
	res, _, err := s.answer(ctx, req.Name, AnswerRequest{Option: req.Option, Text: req.Text, Since: req.Since},
		answerer{who: req.Who, by: by, from: "host " + req.From})
	if err != nil {
		return verbs.Result{}, err
	}
	return verbs.Result{Message: res.Message}, nil
}

// optionInput is what choosing option key in item's dialog takes: for
// a known agent, the digit, and Enter where the digit only moves the
// selection (confirms); any other agent (and a blocked session's
// "continue") a line.
func optionInput(it inbox.Item, key string) verbs.InjectRequest {
	switch {
	case it.Kind == inbox.KindBlocked:
		return verbs.InjectRequest{Name: it.Session, Text: "continue", Enter: true}
	case knownAgent(it.Agent):
		return verbs.InjectRequest{Name: it.Session, Text: key, Enter: confirms[dialog{it.Agent, it.Kind}], NoClear: true}
	}
	return verbs.InjectRequest{Name: it.Session, Text: key, Enter: true, NoClear: true}
}

// dialog is a known agent's kind of dialog.
type dialog struct{ agent, kind string }

// confirms holds the known agents' dialogs whose digit only moves the
// selection, so Enter must follow it. Elsewhere the digit is the
// answer: Claude Code's dialogs, Codex's approval overlay and Gemini
// CLI's lists (fewer than ten options) act on it at once, and an Enter
// after it would reach whatever the agent shows next.
var confirms = map[dialog]bool{
	// Codex's trust and hooks-review screens ("enter continue",
	// "enter confirm").
	{herd.AgentCodex, inbox.KindStartup}: true,
}

// knownAgent reports whether herd knows agent's numbered dialogs (a digit
// answers them).
func knownAgent(agent string) bool {
	return agent == herd.AgentClaude || agent == herd.AgentCodex || agent == herd.AgentGemini
}
