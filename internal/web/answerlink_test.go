package web

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/web/auth"
	"herd/internal/web/inbox"
)

// TestAnswerLink: a notification's links, and one-tap answers through
// them: a confirmation page, a same-origin POST with its form token,
// delivered once through the console's answer path.
func TestAnswerLink(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	c := newTestConsole(t, func(o *Options, url string) { o.AnswerKey, o.Config.URL = key, url })
	c.back.screen = " Do you want to proceed?\n ❯ 1. Yes\n   2. Yes, and don't ask again\n   3. No, and tell Claude what to do differently (esc)\n"
	ctx := context.Background()
	if l := New(Options{Backend: c.back, AnswerKey: key}).Links(ctx, "w-0"); l.Click != "" || len(l.Actions) != 0 {
		t.Errorf("[no url] expected no links … got %+v", l)
	}
	l := c.srv.Links(ctx, "w-0")
	if l.Click != c.url+"/?item=w-0" || len(l.Actions) != 3 || !strings.HasSuffix(l.Actions[0].Label, "Yes") {
		t.Fatalf("[links] expected the item and three answers … got %+v", l)
	}
	yes := strings.TrimPrefix(l.Actions[0].URL, c.url)
	no := strings.TrimPrefix(l.Actions[2].URL, c.url)
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, form url.Values, origin string) (int, string) {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequest(method, c.url+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// The GET only shows what it would do.
	code, page := do("GET", yes, nil, "")
	if code != 200 || !strings.Contains(page, `<form method="post"`) || !strings.Contains(page, "Yes") || len(c.verbs.injected) != 0 {
		t.Fatalf("[confirmation page] expected a form and nothing typed … got %d %q, %d injected", code, page, len(c.verbs.injected))
	}
	form := url.Values{"f": {c.srv.signer.FormToken(strings.TrimPrefix(yes, answerPrefix))}}
	for _, x := range []struct {
		name   string
		form   url.Values
		origin string
		want   int
	}{
		{"no origin", form, "", http.StatusForbidden},
		{"other origin", form, "https://evil.example", http.StatusForbidden},
		{"no form token", url.Values{}, c.url, http.StatusForbidden},
		{"form token of another link", url.Values{"f": {c.srv.signer.FormToken(strings.TrimPrefix(no, answerPrefix))}}, c.url, http.StatusForbidden},
	} {
		if code, _ := do("POST", yes, x.form, x.origin); code != x.want {
			t.Errorf("[%s] expected %d … got %d", x.name, x.want, code)
		}
	}
	if len(c.verbs.injected) != 0 {
		t.Fatalf("[refused posts] expected nothing typed … got %+v", c.verbs.injected)
	}

	// The POST from the page answers, once.
	if code, page := do("POST", yes, form, c.url); code != 200 || !strings.Contains(page, "answered") {
		t.Fatalf("[answer] expected 200 … got %d %q", code, page)
	}
	if len(c.verbs.injected) != 1 || c.verbs.injected[0].Text != "1" {
		t.Fatalf("[answer] expected the digit typed once … got %+v", c.verbs.injected)
	}
	if evs := c.rec.kinds(); len(evs) != 1 || evs[0] != herd.EventAnswered+"/"+inbox.KindPermission {
		t.Errorf("[answer] expected one answered event … got %v", evs)
	}
	if code, _ := do("POST", yes, form, c.url); code != http.StatusGone {
		t.Errorf("[reuse] expected 410 … got %d", code)
	}
	// Another answer's link of the same need: the need is answered.
	noForm := url.Values{"f": {c.srv.signer.FormToken(strings.TrimPrefix(no, answerPrefix))}}
	if code, page := do("POST", no, noForm, c.url); code != http.StatusConflict || !strings.Contains(page, AlreadyAnswered) {
		t.Errorf("[other option after] expected 409 already answered … got %d %q", code, page)
	}
	// A link for an option the dialog does not offer is refused.
	later := time.Now().Add(time.Second).UTC()
	c.back.mu.Lock()
	c.back.sessions[0].LastActivityAt = &later
	c.back.mu.Unlock()
	items, _ := c.srv.inbox(ctx, "w-0")
	odd := answerPrefix + c.srv.signer.Sign("w-0", items[0].Since, "9", "Nine")
	if code, _ := do("POST", odd, url.Values{"f": {c.srv.signer.FormToken(strings.TrimPrefix(odd, answerPrefix))}}, c.url); code != http.StatusBadRequest {
		t.Errorf("[option not offered] expected 400 … got %d", code)
	}
	// A link of another session, whose need it does not name: refused.
	other := answerPrefix + c.srv.signer.Sign("w-1", items[0].Since, "1", "Yes")
	if code, _ := do("POST", other, url.Values{"f": {c.srv.signer.FormToken(strings.TrimPrefix(other, answerPrefix))}}, c.url); code != http.StatusConflict {
		t.Errorf("[another session] expected 409 … got %d", code)
	}
	if len(c.verbs.injected) != 1 {
		t.Errorf("[refused] expected nothing more typed … got %+v", c.verbs.injected)
	}
	if code, _ := do("GET", answerPrefix+"forged.sig", nil, ""); code != http.StatusForbidden {
		t.Errorf("[forged] expected 403 … got %d", code)
	}
}

// TestAnswerOtherHost: an answer for another host's session goes to that
// host (the verbs forward it), never typed from here.
func TestAnswerOtherHost(t *testing.T) {
	c := newTestConsole(t)
	c.back.mu.Lock()
	c.back.sessions[0].Host = "other"
	c.back.mu.Unlock()
	cl, csrf := c.browser(t, auth.ScopeOperate)
	var items []inbox.Item
	c.call(t, cl, "GET", "/api/v1/inbox", nil, nil, &items)
	if len(items) != 1 {
		t.Fatalf("[inbox] expected the item … got %+v", items)
	}
	var res AnswerResult
	if code := c.call(t, cl, "POST", "/api/v1/sessions/w-0/answer", map[string]string{"Origin": c.url, auth.CSRFHeader: csrf},
		AnswerRequest{Option: "1", Since: items[0].Since}, &res); code != 200 {
		t.Fatalf("[answer] expected 200 … got %d", code)
	}
	if len(c.verbs.answers) != 1 || len(c.verbs.injected) != 0 || len(c.rec.kinds()) != 0 {
		t.Fatalf("[answer] expected it forwarded, nothing typed or recorded here … got %+v, %+v, %v", c.verbs.answers, c.verbs.injected, c.rec.kinds())
	}
	if a := c.verbs.answers[0]; a.Name != "w-0" || a.Option != "1" || !a.Since.Equal(items[0].Since) || !strings.HasPrefix(a.Who, "browser:") ||
		!strings.HasPrefix(a.By, "browser:") || strings.Contains(a.By, " from ") {
		t.Errorf("[answer] expected the request with its since and who … got %+v", a)
	}
}

// TestAnswerLinkBounds: an answer link's POST is cheap to refuse. A body
// over maxLinkForm is 413 before it is parsed and nothing is typed; a
// forged link is refused before its body is read; a link whose nonce is
// short (it needs the key) answers instead of panicking.
func TestAnswerLinkBounds(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	c := newTestConsole(t, func(o *Options, url string) { o.AnswerKey, o.Config.URL = key, url })
	c.back.screen = " Do you want to proceed?\n ❯ 1. Yes\n   2. No\n"
	items, err := c.srv.inbox(context.Background(), "w-0")
	if err != nil || len(items) != 1 {
		t.Fatalf("[inbox] expected the item … got %+v %v", items, err)
	}
	post := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", c.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", c.url)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("[%s] expected a reply … got %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	short := c.srv.signer.SignClaim(auth.AnswerClaim{Session: "w-0", Since: items[0].Since, Option: "1", Label: "Yes",
		Expires: time.Now().Add(time.Minute).Unix(), Nonce: "abc"})
	sform := url.Values{"f": {c.srv.signer.FormToken(short)}}.Encode()
	if code, page := post(answerPrefix+short, sform); code != http.StatusOK {
		t.Fatalf("[short nonce] expected 200 … got %d %q", code, page)
	}
	if len(c.verbs.injected) != 1 || len(c.rec.events) != 1 || c.rec.events[0].Data["who"] != "link:abc" {
		t.Errorf("[short nonce] expected one answer by link:abc … got %+v %+v", c.verbs.injected, c.rec.events)
	}
	tok := c.srv.signer.Sign("w-0", items[0].Since, "1", "Yes")
	form := url.Values{"f": {c.srv.signer.FormToken(tok)}}.Encode()
	big := form + "&pad=" + strings.Repeat("x", maxLinkForm)
	if code, _ := post(answerPrefix+tok, big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("[body over the bound] expected 413 … got %d", code)
	}
	// Over the link's bound, under the console's: the link is refused
	// for what it is, its body never read.
	if code, _ := post(answerPrefix+"forged.sig", strings.Repeat("x=1&", 2*maxLinkForm)); code != http.StatusForbidden {
		t.Errorf("[forged link, big body] expected 403 … got %d", code)
	}
	if len(c.verbs.injected) != 1 {
		t.Fatalf("[refused] expected nothing more typed … got %+v", c.verbs.injected)
	}
}
