package web

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"herd/internal/attention"
	"herd/internal/web/auth"
	"herd/internal/web/inbox"
)

var _ attention.Linker = (*Server)(nil)

// Links implements attention.Linker: a notification of session opens its
// inbox item, and, when the item offers answers, carries one signed,
// single-use, expiring link per answer (at most three). Without a public
// URL ([web] url) there are none.
func (s *Server) Links(ctx context.Context, session string) attention.Links {
	base := s.o.Config.URL
	if base == "" {
		return attention.Links{}
	}
	l := attention.Links{Click: base + "/?item=" + url.QueryEscape(session)}
	if s.signer == nil {
		return l
	}
	items, err := s.inbox(ctx, session)
	if err != nil || len(items) == 0 {
		return l
	}
	it := items[0]
	if it.Kind != inbox.KindPermission && it.Kind != inbox.KindQuestion && it.Kind != inbox.KindStartup {
		return l
	}
	for _, o := range it.Options[:min(len(it.Options), 3)] {
		tok := s.signer.Sign(session, it.Since, o.Key, o.Label)
		l.Actions = append(l.Actions, attention.LinkAction{Label: o.Label, URL: base + answerPrefix + tok})
	}
	return l
}

// handleAnswerLink serves an answer link: its GET a page that says what
// it will answer, with a form; that form's POST (same origin, with the
// page's form token) spends the link and answers through the one answer
// path. The link is its own credential: no login.
func (s *Server) handleAnswerLink(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.URL.Path, answerPrefix)
	if s.signer == nil {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		c, err := s.signer.Verify(r.Context(), tok)
		if err != nil {
			s.linkRefused(w, r, err)
			return
		}
		question := ""
		if items, err := s.inbox(r.Context(), c.Session); err == nil && len(items) > 0 && items[0].Since.Equal(c.Since) {
			question = items[0].Text
		}
		formPage(w)
		page(w, http.StatusOK, "Answer "+c.Session+"?",
			`<p>Answer <b>`+htmlEscape(c.Session)+`</b> with <b>`+htmlEscape(c.Label)+`</b>?</p>`+
				cond(question != "", `<pre>`+htmlEscape(question)+`</pre>`)+
				`<form method="post" action="`+htmlEscape(answerPrefix+tok)+`">`+
				`<input type="hidden" name="f" value="`+htmlEscape(s.signer.FormToken(tok))+`">`+
				`<button type="submit">Answer “`+htmlEscape(c.Label)+`”</button></form>`+
				`<p>This link works once, until `+htmlEscape(timeOf(c.Expires))+`.</p>`)
	case http.MethodPost:
		s.postAnswerLink(w, r, tok)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// maxLinkForm bounds an answer link's POST body: its form holds one
// token of 43 characters.
const maxLinkForm = 4 << 10

// postAnswerLink spends an answer link and answers with it. The cheap
// checks come first, the body last: the Origin, then the link's
// signature, and only then a body of at most maxLinkForm bytes, so a
// request with no valid link costs no parsing.
func (s *Server) postAnswerLink(w http.ResponseWriter, r *http.Request, tok string) {
	if !auth.OriginAllowed(auth.Principal{CSRF: "form"}, r.Header.Get("Origin"), r.Host, s.o.Config.TLS()) {
		s.log.Warn("web: answer link posted from another origin", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		page(w, http.StatusForbidden, "Refused", "<p>Cross-origin request refused.</p>")
		return
	}
	if _, err := s.signer.Verify(r.Context(), tok); err != nil {
		s.linkRefused(w, r, err)
		return
	}
	if !s.parseSmallForm(w, r, maxLinkForm) {
		return
	}
	if !s.signer.CheckForm(tok, r.PostForm.Get("f")) {
		s.log.Warn("web: answer link posted without its form token", "remote", r.RemoteAddr)
		page(w, http.StatusForbidden, "Refused", "<p>Missing or wrong form token: open the link again.</p>")
		return
	}
	c, err := s.signer.Spend(r.Context(), tok)
	if err != nil {
		s.linkRefused(w, r, err)
		return
	}
	who := "link:" + clip(c.Nonce, 8)
	res, code, err := s.answer(r.Context(), c.Session, AnswerRequest{Option: c.Option, Since: c.Since, nonce: c.Nonce},
		answerer{who: who, by: who, from: r.RemoteAddr})
	if err != nil {
		page(w, code, "Not answered", `<p>`+htmlEscape(c.Session)+`: `+htmlEscape(err.Error())+`</p>`)
		return
	}
	page(w, http.StatusOK, "Answered", `<p>`+htmlEscape(c.Session)+` answered “`+htmlEscape(c.Label)+`”: `+htmlEscape(res.Message)+`</p>`)
}

// parseSmallForm parses r's form body of at most limit bytes, answering
// a larger one 413 and a malformed one 400 (false: answered).
func (s *Server) parseSmallForm(w http.ResponseWriter, r *http.Request, limit int64) bool {
	if r.ContentLength > limit {
		page(w, http.StatusRequestEntityTooLarge, "Refused", "<p>Request body too large.</p>")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			page(w, http.StatusRequestEntityTooLarge, "Refused", "<p>Request body too large.</p>")
			return false
		}
		page(w, http.StatusBadRequest, "Refused", "<p>Malformed form.</p>")
		return false
	}
	return true
}

// clip returns s cut to at most n bytes.
func clip(s string, n int) string { return s[:min(len(s), n)] }

// linkRefused answers a link that is invalid, expired or spent; an
// invalid one is slowed and logged like a failed login. A link whose
// record of use cannot be read is refused for now (503).
func (s *Server) linkRefused(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusGone
	switch {
	case errors.Is(err, auth.ErrLinkInvalid):
		s.log.Warn("web: invalid answer link", "remote", r.RemoteAddr)
		s.slow(r)
		code = http.StatusForbidden
	case !errors.Is(err, auth.ErrLinkExpired) && !errors.Is(err, auth.ErrLinkSpent):
		s.log.Warn("web: answer link not checked", "remote", r.RemoteAddr, "err", err)
		page(w, http.StatusServiceUnavailable, "Not answered", "<p>This link cannot be checked now. Try again in a moment, or open the console to answer.</p>")
		return
	}
	page(w, code, "Not answered", "<p>"+htmlEscape(err.Error())+". Open the console to answer.</p>")
}

// page writes a small HTML page: title and body are the caller's, body
// already escaped.
func page(w http.ResponseWriter, code int, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	io.WriteString(w, `<!doctype html><html lang="en"><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">`+
		`<title>`+html.EscapeString(title)+` · herd</title><body><h1>`+html.EscapeString(title)+`</h1>`+body+`</body></html>`)
}

func cond(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// answerPrefix is the path answer links live under.
const answerPrefix = "/a/"

// timeOf shows a Unix time as the link page's clock time.
func timeOf(unix int64) string { return time.Unix(unix, 0).UTC().Format("15:04 MST") }
