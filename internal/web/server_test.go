package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/verbs"
	"herd/internal/web/ansi"
	"herd/internal/web/auth"
	"herd/internal/web/inbox"
)

// fakeBackend serves a fixed fleet.
type fakeBackend struct {
	// TaskBackend is the daemon's task API over a fake task component
	// (newTestConsole's; tasks_test.go); nil elsewhere.
	TaskBackend
	mu       sync.Mutex
	sessions []api.SessionView
	cause    map[string]*herd.Event
	screen   string
	// screenErr, when set, fails every read of the screen.
	screenErr error
	// colour is the screen with escapes, when set.
	colour string
	events []herd.Event
	// usageQ is the query Usage was last asked.
	usageQ url.Values
	// cursors counts the reads of the newest event (a hub's start).
	cursors int
}

func (f *fakeBackend) Sessions(context.Context) (json.RawMessage, []api.SessionView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(f.sessions)
	return b, append([]api.SessionView(nil), f.sessions...), nil
}

func (f *fakeBackend) Session(_ context.Context, name string) (json.RawMessage, error) {
	return json.RawMessage(`{"name":"` + name + `"}`), nil
}

func (f *fakeBackend) Screen(_ context.Context, _ string, _ int, escapes bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.screenErr != nil {
		return "", f.screenErr
	}
	if escapes && f.colour != "" {
		return f.colour, nil
	}
	return f.screen, nil
}

func (f *fakeBackend) Events(_ context.Context, q EventQuery) ([]herd.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q.Kind == herd.EventActivity {
		if e := f.cause[q.Session]; e != nil {
			return []herd.Event{*e}, nil
		}
		return nil, nil
	}
	if q.Limit == 1 && q.Session == "" {
		f.cursors++
	}
	var out []herd.Event
	for _, e := range f.events {
		if e.ID > q.After && (q.Kind == "" || e.Kind == q.Kind) {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeBackend) Agents(context.Context) (map[string]string, error) {
	return map[string]string{"w": herd.AgentClaude}, nil
}

// Usage answers the daemon's report for q and records q.
func (f *fakeBackend) Usage(_ context.Context, q url.Values) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usageQ = q
	return json.RawMessage(`{"by":"day","since":null,"lines":[{"key":"2026-11-26","input_tokens":10,"output_tokens":2,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5}],"total":{"input_tokens":10,"output_tokens":2,"cache_read_tokens":0,"cache_write_tokens":0,"cost_usd":0.5},"prices_dated":"x"}`), nil
}

// fakeVerbs records what was typed.
type fakeVerbs struct {
	mu sync.Mutex
	// onInject, when set, sees each inject as the agent would (a screen
	// that changes on Esc).
	onInject func(verbs.InjectRequest)
	// injectErr, when set, is what each inject returns once it has
	// typed (recorded) its text.
	injectErr error
	injected  []verbs.InjectRequest
	stopped   []string
	answers   []verbs.AnswerRequest
}

func (f *fakeVerbs) Inject(_ context.Context, req verbs.InjectRequest) (verbs.Result, error) {
	time.Sleep(20 * time.Millisecond) // a slow tmux: two answers overlap
	f.mu.Lock()
	f.injected = append(f.injected, req)
	on, err := f.onInject, f.injectErr
	f.mu.Unlock()
	if on != nil {
		on(req)
	}
	if err != nil {
		return verbs.Result{}, err
	}
	return verbs.Result{Message: "sent"}, nil
}

func (f *fakeVerbs) Stop(_ context.Context, req verbs.StopRequest) (verbs.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, req.Name)
	return verbs.Result{Message: "stopped"}, nil
}

func (f *fakeVerbs) Resume(context.Context, verbs.SessionRequest) (verbs.Result, error) {
	return verbs.Result{}, nil
}

func (f *fakeVerbs) Restart(context.Context, verbs.RestartRequest) (verbs.RestartResult, error) {
	return verbs.RestartResult{}, nil
}

func (f *fakeVerbs) Reset(context.Context, verbs.SessionRequest) (verbs.ResetResult, error) {
	return verbs.ResetResult{}, nil
}

func (f *fakeVerbs) Archive(context.Context, verbs.SessionRequest) (verbs.Result, error) {
	return verbs.Result{}, nil
}

func (f *fakeVerbs) Answer(_ context.Context, req verbs.AnswerRequest) (verbs.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, req)
	return verbs.Result{Message: "answered (on host " + "other)"}, nil
}

// fakeRecorder keeps the console's events.
type fakeRecorder struct {
	mu     sync.Mutex
	events []herd.Event
}

func (f *fakeRecorder) Record(_ context.Context, e herd.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	return nil
}

func (f *fakeRecorder) kinds() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		out = append(out, e.Kind+"/"+e.Reason)
	}
	return out
}

type testConsole struct {
	srv   *Server
	url   string
	back  *fakeBackend
	verbs *fakeVerbs
	rec   *fakeRecorder
	// tasks is the task component behind the daemon's API.
	tasks *fakeTasks
	// stop stops the console and waits for it (again: nothing).
	stop func()
}

func newTestConsole(t *testing.T, opts ...func(o *Options, url string)) *testConsole {
	t.Helper()
	t0 := time.Now().Add(-time.Minute).UTC()
	back := &fakeBackend{
		sessions: []api.SessionView{{Name: "w-0", Role: "w", Host: "h", Incarnation: "i1", RuntimeKind: herd.RuntimeTmux,
			State: herd.StateRunning, Activity: herd.ActivityWaiting, LastActivityAt: &t0, StateSince: t0}},
		cause: map[string]*herd.Event{"w-0": {Session: "w-0", Incarnation: "i1", Kind: herd.EventActivity, Reason: "hook",
			Data: map[string]any{"event": "PermissionRequest", "tool": "Bash"}}},
	}
	ft := newFakeTasks()
	back.TaskBackend = ft.backend()
	return startTestConsole(t, &testConsole{back: back, verbs: &fakeVerbs{}, rec: &fakeRecorder{}, tasks: ft}, opts...)
}

// startTestConsole serves a new console over c's backend, verbs and
// recorder on a new port: a daemon started again, its agents as they were.
func startTestConsole(t *testing.T, c *testConsole, opts ...func(o *Options, url string)) *testConsole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Config: config.Web{Listen: "127.0.0.1:0"}, Host: "h", Backend: c.back, Verbs: c.verbs, Events: c.rec,
		Token: "the-token", Poll: 20 * time.Millisecond, FailDelay: time.Millisecond}
	for _, f := range opts {
		f(&o, "http://"+ln.Addr().String())
	}
	n := &testConsole{srv: New(o), url: "http://" + ln.Addr().String(), back: c.back, verbs: c.verbs, rec: c.rec, tasks: c.tasks}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.srv.Run(ctx, ln)
	}()
	var once sync.Once
	n.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(n.stop)
	return n
}

// browser logs a client with a cookie jar in through a link of scope.
func (c *testConsole) browser(t *testing.T, scope string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	resp := logIn(t, cl, c.srv.LoginURL(scope, "/"))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("[login] expected 200 … got %d", resp.StatusCode)
	}
	var w Whoami
	c.call(t, cl, http.MethodGet, "/api/v1/whoami", nil, nil, &w)
	return cl, w.CSRF
}

// logIn follows a login link as a browser does: its GET shows the "Log
// in" page, whose button POSTs the link's nonce from the console's own
// origin. It returns the POST's reply.
func logIn(t *testing.T, cl *http.Client, link string) *http.Response {
	t.Helper()
	resp, err := cl.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `<form method="post" action="/login">`) {
		t.Fatalf("[login page] expected 200 and the Log in form … got %d %q", resp.StatusCode, page)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"t": {u.Query().Get("t")}}
	req, _ := http.NewRequest(http.MethodPost, u.Scheme+"://"+u.Host+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.Scheme+"://"+u.Host)
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// call makes one request; it returns the status.
func (c *testConsole) call(t *testing.T, cl *http.Client, method, path string, h map[string]string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	for k, v := range h {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestLoginAndCookie(t *testing.T) {
	c := newTestConsole(t)
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	link := c.srv.LoginURL(auth.ScopeOperate, "/sessions/w-0")
	resp := logIn(t, http.DefaultClient, link)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ck := resp.Cookies()
	if resp.StatusCode != 200 || len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Secure {
		t.Fatalf("[login] expected 200 and an HttpOnly SameSite=Strict cookie … got %d %+v", resp.StatusCode, ck)
	}
	if !strings.Contains(string(body), `url=/sessions/w-0`) {
		t.Errorf("[login] expected to land on next … got %s", body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("[csp] expected a strict policy … got %q", csp)
	}
	resp, _ = http.Get(link)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("[second use] expected 401 … got %d", resp.StatusCode)
	}
	resp, _ = http.Get(c.url + "/api/v1/sessions")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("[no credential] expected 401 … got %d", resp.StatusCode)
	}
}

// TestLoginPreview: what a chat app's link preview does to a login link
// (HEAD, GET, GET again) spends nothing and sets no cookie; only the
// page's same-origin POST logs in, once.
func TestLoginPreview(t *testing.T) {
	c := newTestConsole(t)
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	link := c.srv.LoginURL(auth.ScopeOperate, "/")
	nonce := strings.TrimPrefix(link[strings.Index(link, "?"):], "?t=")
	for _, method := range []string{http.MethodHead, http.MethodGet, http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, link, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 0 {
			t.Fatalf("[%s] expected 200 and no cookie … got %d %+v", method, resp.StatusCode, resp.Cookies())
		}
	}
	post := func(origin, body string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, c.url+"/login", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	form := url.Values{"t": {nonce}}.Encode()
	for _, x := range []struct {
		name, origin, body string
		want               int
	}{
		{"no origin", "", form, http.StatusForbidden},
		{"other origin", "https://evil.example", form, http.StatusForbidden},
		{"null origin", "null", form, http.StatusForbidden},
		{"body over the bound", c.url, form + "&pad=" + strings.Repeat("x", maxLoginForm), http.StatusRequestEntityTooLarge},
		{"wrong nonce", c.url, "t=" + strings.Repeat("0", 48), http.StatusUnauthorized},
	} {
		if resp := post(x.origin, x.body); resp.StatusCode != x.want || len(resp.Cookies()) != 0 {
			t.Errorf("[%s] expected %d and no cookie … got %d %+v", x.name, x.want, resp.StatusCode, resp.Cookies())
		}
	}
	if resp := post(c.url, form); resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("[the page's POST] expected 200 and the cookie … got %d %+v", resp.StatusCode, resp.Cookies())
	}
	if resp := post(c.url, form); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("[POST again] expected 401 … got %d", resp.StatusCode)
	}
	if resp, err := http.Get(link); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("[GET once spent] expected 401 … got %v %v", resp, err)
	}
}

func TestRequestChecks(t *testing.T) {
	c := newTestConsole(t)
	op, csrf := c.browser(t, auth.ScopeOperate)
	ro, roCSRF := c.browser(t, auth.ScopeRead)
	anon := &http.Client{}
	same := c.url
	for _, x := range []struct {
		name   string
		cl     *http.Client
		method string
		path   string
		h      map[string]string
		want   int
	}{
		{"browser reads", op, "GET", "/api/v1/sessions", nil, 200},
		{"page", op, "GET", "/", nil, 200},
		{"session page", op, "GET", "/sessions/w-0", nil, 200},
		{"script", op, "GET", "/static/common.js", nil, 200},
		{"no listing", op, "GET", "/static/", nil, 404},
		{"page without login", anon, "GET", "/", nil, 401},
		{"script without login", anon, "GET", "/static/common.js", nil, 401},
		{"read scope reads", ro, "GET", "/api/v1/inbox", nil, 200},
		{"token reads", anon, "GET", "/api/v1/sessions", map[string]string{"Authorization": "Bearer the-token"}, 200},
		{"wrong token", anon, "GET", "/api/v1/sessions", map[string]string{"Authorization": "Bearer nope"}, 401},
		{"rebinding host", op, "GET", "/api/v1/sessions", map[string]string{"Host": "evil.example"}, 421},
		{"post without csrf", op, "POST", "/api/v1/sessions/w-0/stop", map[string]string{"Origin": same}, 403},
		{"post with wrong csrf", op, "POST", "/api/v1/sessions/w-0/stop", map[string]string{"Origin": same, auth.CSRFHeader: "x"}, 403},
		{"post from another origin", op, "POST", "/api/v1/sessions/w-0/stop", map[string]string{"Origin": "http://127.0.0.1:1", auth.CSRFHeader: csrf}, 403},
		{"post without origin", op, "POST", "/api/v1/sessions/w-0/stop", map[string]string{auth.CSRFHeader: csrf}, 403},
		{"read scope post", ro, "POST", "/api/v1/sessions/w-0/stop", map[string]string{"Origin": same, auth.CSRFHeader: roCSRF}, 403},
		{"browser post", op, "POST", "/api/v1/sessions/w-0/stop", map[string]string{"Origin": same, auth.CSRFHeader: csrf}, 200},
		{"token post", anon, "POST", "/api/v1/sessions/w-0/stop", map[string]string{"Authorization": "Bearer the-token"}, 200},
		{"unknown verb", anon, "POST", "/api/v1/sessions/w-0/explode", map[string]string{"Authorization": "Bearer the-token"}, 404},
		{"usage without login", anon, "GET", "/api/v1/usage", nil, 401},
		{"usage from a rebinding host", op, "GET", "/api/v1/usage", map[string]string{"Host": "evil.example"}, 421},
		{"usage is read-only", op, "POST", "/api/v1/usage", map[string]string{"Origin": same, auth.CSRFHeader: csrf}, 405},
	} {
		if got := c.call(t, x.cl, x.method, x.path, x.h, nil, nil); got != x.want {
			t.Errorf("[%s] expected %d … got %d", x.name, x.want, got)
		}
	}
	if got := len(c.verbs.stopped); got != 2 {
		t.Errorf("[stops] expected the 2 allowed stops to reach the verb … got %d", got)
	}
	kinds := c.rec.kinds()
	if len(kinds) != 2 || kinds[0] != "console/stop" {
		t.Errorf("[events] expected 2 console/stop events … got %v", kinds)
	}
}

func TestAnswerOnce(t *testing.T) {
	c := newTestConsole(t)
	a, csrfA := c.browser(t, auth.ScopeOperate)
	b, csrfB := c.browser(t, auth.ScopeOperate)
	var items []inbox.Item
	c.call(t, a, "GET", "/api/v1/inbox", nil, nil, &items)
	if len(items) != 1 || items[0].Kind != inbox.KindPermission || len(items[0].Options) != 3 {
		t.Fatalf("[inbox] expected one permission item with 3 answers … got %+v", items)
	}
	since := items[0].Since
	var wg sync.WaitGroup
	codes := make([]int, 2)
	msgs := make([]api.Error, 2)
	for i, who := range []struct {
		cl   *http.Client
		csrf string
	}{{a, csrfA}, {b, csrfB}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = c.call(t, who.cl, "POST", "/api/v1/sessions/w-0/answer",
				map[string]string{"Origin": c.url, auth.CSRFHeader: who.csrf}, AnswerRequest{Option: "1", Since: since}, &msgs[i])
		}()
	}
	wg.Wait()
	ok, conflict := 0, 0
	for i, code := range codes {
		switch code {
		case 200:
			ok++
		case 409:
			conflict++
			if !strings.Contains(msgs[i].Error, AlreadyAnswered) {
				t.Errorf("[second answer] expected %q … got %q", AlreadyAnswered, msgs[i].Error)
			}
		}
	}
	if ok != 1 || conflict != 1 || len(c.verbs.injected) != 1 {
		t.Fatalf("[two answers] expected one delivered, one refused … got codes %v, %d injected", codes, len(c.verbs.injected))
	}
	if in := c.verbs.injected[0]; in.Text != "1" || in.Enter || !in.NoClear {
		t.Errorf("[delivered] expected Claude's dialog to get the digit alone … got %+v", in)
	}
	c.call(t, a, "GET", "/api/v1/inbox", nil, nil, &items)
	if len(items) != 0 {
		t.Errorf("[after] expected the inbox empty … got %+v", items)
	}
	if kinds := c.rec.kinds(); len(kinds) != 1 || kinds[0] != herd.EventAnswered+"/"+inbox.KindPermission {
		t.Errorf("[events] expected one answered event … got %v", kinds)
	}
	// The agent asks again, later: a new need, answerable again.
	later := time.Now().Add(time.Second).UTC()
	c.back.mu.Lock()
	c.back.sessions[0].LastActivityAt = &later
	c.back.mu.Unlock()
	c.call(t, a, "GET", "/api/v1/inbox", nil, nil, &items)
	if len(items) != 1 {
		t.Fatalf("[asks again] expected the new need listed … got %+v", items)
	}
	if code := c.call(t, b, "POST", "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrfB},
		AnswerRequest{Option: "1", Since: since}, nil); code != http.StatusConflict {
		t.Errorf("[answer to the old need] expected 409 … got %d", code)
	}
	if code := c.call(t, b, "POST", "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrfB},
		AnswerRequest{Text: "use git mv instead"}, nil); code != http.StatusOK {
		t.Errorf("[free text] expected 200 … got %d", code)
	}
	n := len(c.verbs.injected)
	if esc, in := c.verbs.injected[n-2], c.verbs.injected[n-1]; esc.Text != "\x1b" || esc.Enter || in.Text != "use git mv instead" || !in.Enter {
		t.Errorf("[free text] expected Esc, then the reply typed with Enter … got %+v, %+v", esc, in)
	}
}

func TestEventStream(t *testing.T) {
	c := newTestConsole(t)
	cl, _ := c.browser(t, auth.ScopeRead)
	req, _ := http.NewRequest("GET", c.url+"/api/v1/events", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("[stream] expected text/event-stream … got %q", ct)
	}
	// Once the hub has read its cursor, append an event and change the
	// fleet.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c.back.mu.Lock()
		n := c.back.cursors
		c.back.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("[stream] expected the hub to start … it did not")
		}
	}
	c.back.mu.Lock()
	c.back.events = append(c.back.events, herd.Event{ID: 7, Session: "w-0", Kind: herd.EventStopped, Message: "<script>"})
	c.back.sessions[0].State = herd.StateStopped
	c.back.mu.Unlock()
	sc := bufio.NewScanner(resp.Body)
	var sawEvent bool
	sessions := 0 // the first is the ping of a new subscription
	for sc.Scan() && !(sawEvent && sessions >= 2) {
		line := sc.Text()
		if strings.HasPrefix(line, "data: {\"id\":7") {
			var e herd.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil || e.Message != "<script>" {
				t.Errorf("[event] expected the event as one JSON object … got %q (%v)", line, err)
			}
			sawEvent = true
		}
		if line == "event: sessions" {
			sessions++
		}
	}
	if !sawEvent || sessions < 2 {
		t.Errorf("[stream] expected the event, the first ping and a sessions change … got event=%v sessions=%d", sawEvent, sessions)
	}
}

func TestLinkHandler(t *testing.T) {
	c := newTestConsole(t)
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	rec := httptest.NewRecorder()
	c.srv.LinkHandler().ServeHTTP(rec, httptest.NewRequest("POST", LinkPath, strings.NewReader(`{"read_only":true,"next":"/sessions/w-0"}`)))
	var res LinkResult
	json.NewDecoder(rec.Body).Decode(&res)
	u, err := url.Parse(res.URL)
	if err != nil || res.Scope != auth.ScopeRead || u.Path != "/login" || u.Query().Get("t") == "" || "http://"+u.Host != c.url {
		t.Fatalf("[link] expected a read-only login link to the console … got %+v", res)
	}
}

// TestScreenColours: the screen endpoint reads the pane with its colours
// and renders them as classes, every byte of the agent's escaped.
func TestScreenColours(t *testing.T) {
	c := newTestConsole(t)
	c.back.screen = "plain <script>alert(1)</script>\n"
	c.back.colour = "\x1b[31m<script>alert(1)</script>\x1b[0m ok\n"
	var scr Screen
	if got := c.call(t, &http.Client{}, "GET", "/api/v1/sessions/w-0/screen", map[string]string{"Authorization": "Bearer the-token"}, nil, &scr); got != 200 {
		t.Fatalf("[screen] expected 200 … got %d", got)
	}
	if want := `<span class="fg1">&lt;script&gt;alert(1)&lt;/script&gt;</span> ok` + "\n"; scr.HTML != want {
		t.Errorf("[html] expected %q … got %q", want, scr.HTML)
	}
	if len(scr.Segments) != 2 || scr.Segments[0] != (ansi.Segment{Text: "<script>alert(1)</script>", Class: "fg1"}) {
		t.Errorf("[segments] expected the red run as text … got %+v", scr.Segments)
	}
}
