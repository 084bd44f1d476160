package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/runtime"
	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/web/auth"
)

// postLink posts an answer link's confirmation form (its form token, from
// the console's origin) and returns the status and page.
func (c *testConsole) postLink(t *testing.T, link string) (int, string) {
	t.Helper()
	tok := strings.TrimPrefix(link, answerPrefix)
	form := url.Values{"f": {c.srv.signer.FormToken(tok)}}
	req, _ := http.NewRequest(http.MethodPost, c.url+link, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.url)
	return c.send(t, req)
}

// getLink opens an answer link's confirmation page.
func (c *testConsole) getLink(t *testing.T, link string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.url+link, nil)
	return c.send(t, req)
}

func (c *testConsole) send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// injected is what was typed into the agents so far.
func (c *testConsole) injected() []string {
	c.verbs.mu.Lock()
	defer c.verbs.mu.Unlock()
	var out []string
	for _, r := range c.verbs.injected {
		out = append(out, r.Name+":"+r.Text)
	}
	return out
}

// openStore opens the SQLite store at path, closed when the test ends.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestAnswerOnceAcrossRestarts: a need answered through a one-tap link
// stays answered when the daemon restarts on the same store while the
// agent still shows the need (a long tool run after "Yes", the same
// since): the inbox leaves it out, the spent link is 410, another link,
// the console's answer button and the JSON API are 409 "already answered
// by … at …", and nothing more is typed. A new need of the session is
// answered as ever.
func TestAnswerOnceAcrossRestarts(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	path := filepath.Join(t.TempDir(), "herd.db")
	withStore := func(st store.Store) func(o *Options, url string) {
		return func(o *Options, url string) {
			o.AnswerKey, o.Config.URL, o.Answers = key, url, StoreAnswers{Store: st}
		}
	}
	st := openStore(t, path)
	c := newTestConsole(t, withStore(st))
	c.back.screen = " Do you want to proceed?\n ❯ 1. Yes\n   2. Yes, and don't ask again\n   3. No, and tell Claude what to do differently (esc)\n"
	ctx := context.Background()
	items, err := c.srv.inbox(ctx, "w-0")
	if err != nil || len(items) != 1 {
		t.Fatalf("[inbox] expected the need … got %+v %v", items, err)
	}
	since := items[0].Since
	l := c.srv.Links(ctx, "w-0")
	if len(l.Actions) != 3 {
		t.Fatalf("[links] expected three answers … got %+v", l)
	}
	yes := strings.TrimPrefix(l.Actions[0].URL, c.url)
	no := strings.TrimPrefix(l.Actions[2].URL, c.url)
	if code, page := c.postLink(t, yes); code != http.StatusOK {
		t.Fatalf("[answer] expected 200 … got %d %q", code, page)
	}
	if code, _ := c.postLink(t, yes); code != http.StatusGone {
		t.Errorf("[replay before the restart] expected 410 … got %d", code)
	}
	if got := c.injected(); len(got) != 1 || got[0] != "w-0:1" {
		t.Fatalf("[answer] expected 1 typed once … got %q", got)
	}

	// The daemon restarts on the same store; the agent still shows the
	// need, with the same since.
	c.stop()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = openStore(t, path)
	c = startTestConsole(t, c, withStore(st))
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	if items, err := c.srv.inbox(ctx, ""); err != nil || len(items) != 0 {
		t.Errorf("[inbox after the restart] expected the answered need left out … got %+v %v", items, err)
	}
	if code, page := c.getLink(t, yes); code != http.StatusGone || strings.Contains(page, "<form") {
		t.Errorf("[spent link's page after the restart] expected 410 and no form … got %d %q", code, page)
	}
	if code, page := c.postLink(t, yes); code != http.StatusGone || !strings.Contains(page, "used already") {
		t.Errorf("[spent link after the restart] expected 410 … got %d %q", code, page)
	}
	code, page := c.postLink(t, no)
	if code != http.StatusConflict || !strings.Contains(page, AlreadyAnswered+" by link:") || !strings.Contains(page, " at ") {
		t.Errorf("[another link of the need after the restart] expected 409 already answered by the link … got %d %q", code, page)
	}
	cl, csrf := c.browser(t, auth.ScopeOperate)
	var conflict AnswerConflict
	if code := c.call(t, cl, http.MethodPost, "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrf},
		AnswerRequest{Option: "1", Since: since}, &conflict); code != http.StatusConflict ||
		!strings.HasPrefix(conflict.Error, AlreadyAnswered+" by link:") || !strings.HasPrefix(conflict.AnsweredBy, "link:") || conflict.AnsweredAt == nil {
		t.Errorf("[the console's answer button after the restart] expected 409 naming who and when … got %d %+v", code, conflict)
	}
	conflict = AnswerConflict{}
	if code := c.call(t, http.DefaultClient, http.MethodPost, "/api/v1/sessions/w-0/answer", map[string]string{"Authorization": "Bearer the-token"},
		AnswerRequest{Text: "go on"}, &conflict); code != http.StatusConflict || !strings.HasPrefix(conflict.Error, AlreadyAnswered+" by link:") {
		t.Errorf("[the JSON API after the restart] expected 409 already answered by the link … got %d %+v", code, conflict)
	}

	// A console that did not read the answers at its start (they could
	// not be read then) shows the need, and the record still refuses it.
	bare := New(Options{Host: "h", Backend: c.back, Verbs: c.verbs, Answers: StoreAnswers{Store: st}})
	if items, _ := bare.inbox(ctx, "w-0"); len(items) != 1 {
		t.Fatalf("[console without its start] expected the need shown … got %+v", items)
	}
	_, code, err = bare.answer(ctx, "w-0", AnswerRequest{Option: "1", Since: since}, answerer{who: "browser:x", by: "browser:x", from: "test"})
	var ae *AnsweredError
	if code != http.StatusConflict || !errors.As(err, &ae) || !strings.HasPrefix(ae.Who, "link:") {
		t.Errorf("[the record refuses] expected 409 already answered by the link … got %d %v", code, err)
	}
	if got := c.injected(); len(got) != 1 {
		t.Fatalf("[after the restart] expected nothing more typed … got %q", got)
	}

	// The agent moves on and asks again: a new need, answered once.
	later := time.Now().Add(time.Second).UTC()
	c.back.mu.Lock()
	c.back.sessions[0].LastActivityAt = &later
	c.back.mu.Unlock()
	items, err = c.srv.inbox(ctx, "w-0")
	if err != nil || len(items) != 1 || !items[0].Since.Equal(later) {
		t.Fatalf("[new need] expected it in the inbox … got %+v %v", items, err)
	}
	if code := c.call(t, cl, http.MethodPost, "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrf},
		AnswerRequest{Option: "1", Since: later}, nil); code != http.StatusOK {
		t.Errorf("[new need] expected 200 … got %d", code)
	}
	if got := c.injected(); len(got) != 2 {
		t.Errorf("[new need] expected its answer typed … got %q", got)
	}
}

// failingAnswers is a record of answers that cannot be reached.
type failingAnswers struct{ *memAnswers }

var errAway = errors.New("store away")

func (failingAnswers) ClaimAnswer(context.Context, store.Answer) (store.Answer, bool, error) {
	return store.Answer{}, false, errAway
}
func (failingAnswers) SpendNonce(context.Context, string, time.Time) (bool, error) {
	return false, errAway
}
func (failingAnswers) NonceSpent(context.Context, string) (bool, error) { return false, errAway }

// TestAnswerRecordAway: when the record of answers cannot be reached, an
// answer and an answer link are refused for now (503), nothing typed and
// the link not spent.
func TestAnswerRecordAway(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	rec := failingAnswers{memAnswers: newMemAnswers()}
	c := newTestConsole(t, func(o *Options, url string) { o.AnswerKey, o.Config.URL, o.Answers = key, url, rec })
	c.back.screen = " Do you want to proceed?\n ❯ 1. Yes\n   2. No\n"
	items, err := c.srv.inbox(context.Background(), "w-0")
	if err != nil || len(items) != 1 {
		t.Fatalf("[inbox] expected the need … got %+v %v", items, err)
	}
	cl, csrf := c.browser(t, auth.ScopeOperate)
	var e struct{ Error string }
	if code := c.call(t, cl, http.MethodPost, "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrf},
		AnswerRequest{Option: "1", Since: items[0].Since}, &e); code != http.StatusServiceUnavailable || !strings.Contains(e.Error, "nothing typed") {
		t.Errorf("[answer] expected 503 nothing typed … got %d %q", code, e.Error)
	}
	link := answerPrefix + c.srv.signer.Sign("w-0", items[0].Since, "1", "Yes")
	if code, _ := c.getLink(t, link); code != http.StatusServiceUnavailable {
		t.Errorf("[link page] expected 503 … got %d", code)
	}
	if code, _ := c.postLink(t, link); code != http.StatusServiceUnavailable {
		t.Errorf("[link] expected 503 … got %d", code)
	}
	if got := c.injected(); len(got) != 0 {
		t.Errorf("[away] expected nothing typed … got %q", got)
	}
	if items, _ := c.srv.inbox(context.Background(), "w-0"); len(items) != 1 {
		t.Errorf("[away] expected the need still open … got %+v", items)
	}
}

// TestAnswerTypedNotConfirmed: an answer typed but not seen taken (its
// text stayed on the input line after Enter, or the typing ran out of
// time) keeps its claim: 502 saying so, an answered event marked
// unconfirmed, and a second answer to the need is 409, nothing more
// typed. An answer that failed otherwise (nothing typed) releases it:
// the need can be answered again.
func TestAnswerTypedNotConfirmed(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		kept bool
	}{
		{"stayed on the input line", fmt.Errorf("inject: tmux: session w-0: %w (pressed 2 times)", runtime.ErrNotSubmitted), true},
		{"ran out of time", fmt.Errorf("inject: %w", context.DeadlineExceeded), true},
		{"nothing typed", errors.New("inject: session w-0 is not a live tmux session"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tc := newTestConsole(t)
			tc.back.screen = " Do you want to proceed?\n ❯ 1. Yes\n   2. No\n"
			items, err := tc.srv.inbox(context.Background(), "w-0")
			if err != nil || len(items) != 1 {
				t.Fatalf("[inbox] expected the need … got %+v %v", items, err)
			}
			cl, csrf := tc.browser(t, auth.ScopeOperate)
			h := map[string]string{"Origin": tc.url, auth.CSRFHeader: csrf}
			tc.verbs.mu.Lock()
			tc.verbs.injectErr = c.err
			tc.verbs.mu.Unlock()
			var e struct{ Error string }
			code := tc.call(t, cl, http.MethodPost, "/api/v1/sessions/w-0/answer", h, AnswerRequest{Option: "1", Since: items[0].Since}, &e)
			want := http.StatusBadGateway
			if !c.kept {
				want = http.StatusInternalServerError
			}
			if code != want || (c.kept && !strings.Contains(e.Error, "not seen taking it")) {
				t.Fatalf("[first] expected %d … got %d %q", want, code, e.Error)
			}
			tc.verbs.mu.Lock()
			tc.verbs.injectErr = nil
			tc.verbs.mu.Unlock()
			code = tc.call(t, cl, http.MethodPost, "/api/v1/sessions/w-0/answer", h, AnswerRequest{Option: "2", Since: items[0].Since}, &e)
			switch {
			case c.kept && code != http.StatusConflict:
				t.Errorf("[second] expected 409, the first answer's claim kept … got %d %q", code, e.Error)
			case !c.kept && code != http.StatusOK:
				t.Errorf("[second] expected 200, the claim released … got %d %q", code, e.Error)
			}
			typed := tc.injected()
			if c.kept && len(typed) != 1 {
				t.Errorf("[typed] expected only the first answer typed … got %q", typed)
			}
		})
	}
}
