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
}

// AnswerResult says what an answer did.
type AnswerResult struct {
	Message string `json:"message"`
}

// answer is the last answer given to a session.
type answer struct {
	incarnation string
	since       time.Time
	at          time.Time
	who         string
}

// covers reports whether an answer settled item: same incarnation, and
// the need began before the answer. A need that began after it (the
// agent moved on and asks again) is a new one.
func (a answer) covers(it inbox.Item) bool {
	return a.incarnation == it.Incarnation && !it.Since.After(a.at)
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

func (s *Server) handleAnswer(w http.ResponseWriter, r *http.Request) {
	var in AnswerRequest
	if err := decode(r, &in); err != nil {
		fail(w, err)
		return
	}
	p := principal(r)
	res, code, err := s.answer(r.Context(), r.PathValue("name"), in, p.Who, r.RemoteAddr)
	if err != nil {
		replyError(w, code, err.Error())
		return
	}
	replyJSON(w, http.StatusOK, res)
}

// answer types an answer into session name's need, once: the one path of
// every answer (the inbox's buttons and replies, a notification's answer
// link). who and from name the answerer in the answered event. On error,
// code is the HTTP status it maps to.
func (s *Server) answer(ctx context.Context, name string, in AnswerRequest, who, from string) (AnswerResult, int, error) {
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
		res, err := s.o.Verbs.Answer(ctx, verbs.AnswerRequest{Name: name, Option: in.Option, Text: in.Text, Since: in.Since, Who: who + " from " + from})
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
		s.mu.Lock()
		a, ok := s.answered[name]
		s.mu.Unlock()
		msg := AlreadyAnswered
		if ok {
			msg += " by " + a.who + " at " + a.at.Format(time.RFC3339)
		} else if len(items) == 0 {
			msg = "session " + name + " waits for nothing a person can answer now"
		}
		return AnswerResult{}, http.StatusConflict, errors.New(msg)
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
	if in.Text != "" && it.Kind == inbox.KindPermission && knownAgent(it.Agent) {
		// A reply in words to a permission dialog declines it first
		// (Esc: "No, and tell the agent what to do differently"), then
		// types the words to the agent's prompt.
		if _, err := s.o.Verbs.Inject(ctx, verbs.InjectRequest{Name: name, Text: "\x1b", NoClear: true}); err != nil {
			return AnswerResult{}, statusOf(err), err
		}
	}
	res, err := s.o.Verbs.Inject(ctx, req)
	if err != nil {
		return AnswerResult{}, statusOf(err), err
	}
	now := time.Now().UTC()
	s.mu.Lock()
	s.answered[name] = answer{incarnation: it.Incarnation, since: it.Since, at: now, who: who}
	s.mu.Unlock()
	s.record(ctx, name, it.Incarnation, herd.EventAnswered, it.Kind, fmt.Sprintf("%s answered by %s from %s", what, who, from),
		map[string]any{"who": who, "from": from, "kind": it.Kind, "option": in.Option, "text": in.Text, "question": inbox.Clip(it.Text, 500)})
	if s.hub != nil {
		s.hub.publish(Change{Sessions: true}) // the item is gone now, not at the next poll
	}
	return AnswerResult{Message: res.Message}, http.StatusOK, nil
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
	from := "host " + req.From
	res, _, err := s.answer(ctx, req.Name, AnswerRequest{Option: req.Option, Text: req.Text, Since: req.Since}, req.Who, from)
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
