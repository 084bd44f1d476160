// Package web is herd's console: a web server inside the daemon that
// shows the whole fleet and the sessions that need a person, and lets
// that person answer them, from a browser or a phone.
//
// The daemon builds one Server and runs it on its own listener. It reads
// through the daemon's API (Backend) and acts only through the verbs
// (internal/verbs), like every other front door; it writes nothing but
// its own events (answered, console) and its record of answers (Answers:
// each need answered once, each answer link spent once, across restarts). Every request is authenticated,
// every state change CSRF- and Origin-checked, and every byte an agent
// produced is escaped: the console types into agents, it is a remote
// shell. It never serves a page that runs inline or third-party code.
package web

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/verbs"
	"herd/internal/web/auth"
)

//go:embed assets
var assets embed.FS

// Verbs are the verbs the console offers (internal/verbs).
type Verbs interface {
	Inject(ctx context.Context, req verbs.InjectRequest) (verbs.Result, error)
	Stop(ctx context.Context, req verbs.StopRequest) (verbs.Result, error)
	Resume(ctx context.Context, req verbs.SessionRequest) (verbs.Result, error)
	Restart(ctx context.Context, req verbs.RestartRequest) (verbs.RestartResult, error)
	Reset(ctx context.Context, req verbs.SessionRequest) (verbs.ResetResult, error)
	Archive(ctx context.Context, req verbs.SessionRequest) (verbs.Result, error)
	// Answer answers another host's session on its own daemon.
	Answer(ctx context.Context, req verbs.AnswerRequest) (verbs.Result, error)
}

var _ Verbs = (*verbs.Verbs)(nil)

// Recorder appends the console's own events to the log.
type Recorder interface {
	Record(ctx context.Context, e herd.Event) error
}

// Options configure a Server.
type Options struct {
	// Config is the [web] table.
	Config config.Web
	// Host is this daemon's host (the host of the console's events).
	Host    string
	Backend Backend
	Verbs   Verbs
	Events  Recorder
	// Token is the API token (LoadToken): the machine's own credential.
	Token string
	// Users are the people who log in by name (internal/users.Manager):
	// their tokens, and login links of `herd web url --user`; nil: none.
	Users auth.Users
	Log   *slog.Logger
	// Changes tells of changes to the fleet and the event log; nil: the
	// console polls the Backend for them every Poll.
	Changes Changes
	// Local, when set, is the writer's subscription (status.Subscribe):
	// a change of this host's sessions is read at once instead of at the
	// next poll. Other hosts' changes and the log still come by polling.
	Local func() (<-chan status.Change, func())
	// Resources are this host's agents' CPU and memory samples (the
	// session page's charts); nil: none.
	Resources Resources
	// AnswerKey signs the one-tap answer links of notifications
	// (LoadAnswerKey); nil: none are made.
	AnswerKey []byte
	// Answers keep the answers given and the answer links spent
	// (StoreAnswers); nil: in memory, forgotten when the console stops.
	Answers Answers
	// Poll is how often the fleet is read for changes; when 0, 300ms,
	// or a second with Local (this host's changes come at once; other
	// hosts' and the log's within the second).
	Poll time.Duration
	// FailDelay slows each failed login; 1s when 0.
	FailDelay time.Duration

	// limits replace the console's defaults (tests).
	limits *limits
}

// Server is the console.
type Server struct {
	o    Options
	auth *auth.Auth
	log  *slog.Logger
	// changes is Options.Changes, or hub.
	changes Changes
	// hub polls the Backend when no Changes were given; else nil.
	hub *hub
	// signer makes and checks answer links; nil without Options.AnswerKey.
	signer *auth.Signer
	// answers are Options.Answers, or in memory.
	answers Answers
	// allowHosts are the Host values accepted besides the listen address:
	// [web] allow_hosts and the host of [web] url.
	allowHosts []string

	// limits bound the console's clients.
	limits *limits

	// failMu serialises the delays of failed logins.
	failMu sync.Mutex

	// mu guards the fields below.
	mu sync.Mutex
	// addr is the address served (the listener's), for the Host check
	// and login links.
	addr string
	// serving: Run has its listener.
	serving bool
	// answered holds, by session, the last answer given (the inbox
	// leaves the needs it covers out); the record is answers.
	answered map[string]store.Answer
	// locks serialise answers per session.
	locks map[string]*sync.Mutex
	// screens are the waiting sessions' screens last read, by session.
	screens map[string]cachedScreen
}

// New returns the console; Run serves it.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = 300 * time.Millisecond
		if o.Local != nil {
			o.Poll = time.Second
		}
	}
	if o.FailDelay <= 0 {
		o.FailDelay = time.Second
	}
	if o.limits == nil {
		o.limits = defaultLimits()
	}
	s := &Server{o: o, auth: auth.NewAuth(o.Token, o.Users), log: o.Log, addr: o.Config.Listen, limits: o.limits,
		answers: o.Answers, answered: map[string]store.Answer{}, locks: map[string]*sync.Mutex{}, screens: map[string]cachedScreen{}}
	if s.answers == nil {
		s.answers = newMemAnswers()
	}
	if o.AnswerKey != nil {
		s.signer = auth.NewSigner(o.AnswerKey, s.answers)
	}
	s.allowHosts = append([]string(nil), o.Config.AllowHosts...)
	if h := o.Config.URLHost(); h != "" {
		s.allowHosts = append(s.allowHosts, h)
	}
	s.changes = o.Changes
	if s.changes == nil {
		s.hub = newHub(o.Backend, o.Poll, o.Log)
		s.hub.local = o.Local
		s.changes = s.hub
	}
	return s
}

// Auth returns the console's credentials (login links).
func (s *Server) Auth() *auth.Auth { return s.auth }

// Addr is the address the console serves.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Serving reports whether the console is served.
func (s *Server) Serving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving
}

// LoginURL mints a single-use login link of scope landing on next.
func (s *Server) LoginURL(scope, next string) string {
	return s.loginURL(s.auth.Link(scope, next))
}

// loginURL is the login link of nonce.
func (s *Server) loginURL(nonce string) string {
	if s.o.Config.URL != "" {
		return s.o.Config.URL + "/login?t=" + nonce
	}
	scheme := "http://"
	if s.o.Config.TLS() {
		scheme = "https://"
	}
	host := s.Addr()
	if h, port, err := net.SplitHostPort(host); err == nil {
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			name, _ := os.Hostname()
			if len(s.o.Config.AllowHosts) > 0 {
				name = s.o.Config.AllowHosts[0]
			}
			host = net.JoinHostPort(name, port)
		}
	}
	return scheme + host + "/login?t=" + nonce
}

// Run serves the console on ln until ctx is done.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	// The needs answered before this start stay answered, in the
	// inbox too.
	s.loadAnswers(ctx)
	s.mu.Lock()
	s.addr = ln.Addr().String()
	s.serving = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.serving = false
		s.mu.Unlock()
	}()
	c := s.o.Config
	if !c.Loopback() && !c.TLS() {
		s.log.Warn("web: console served over plain HTTP on a non-loopback address: anyone on the network path can read its login links and cookies",
			"listen", s.addr)
	}
	srv := s.limits.http.Server(s.Handler())
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	ln = s.listen(ln)
	var wg sync.WaitGroup
	if s.hub != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.hub.run(ctx)
		}()
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	var err error
	if c.TLS() {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		err = srv.ServeTLS(ln, c.TLSCert, c.TLSKey)
	} else {
		err = srv.Serve(ln)
	}
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// static is the embedded assets' root.
func static() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err)
	}
	return sub
}

// csp allows the console's own files and nothing else: no inline script
// or style, no other origin, no framing.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"manifest-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'"

// Handler is the console's routes behind its checks.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	files := http.StripPrefix("/static/", http.FileServerFS(static()))
	mux.HandleFunc("GET /static/{file}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("file") == "" {
			http.NotFound(w, r) // no listing
			return
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /manifest.webmanifest", s.serveFile("manifest.webmanifest", "application/manifest+json"))
	mux.HandleFunc("GET /{$}", s.serveFile("index.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /sessions/{name}", s.serveFile("session.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /tasks", s.serveFile("tasks.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /tasks/{id}", s.serveFile("task.html", "text/html; charset=utf-8"))
	mux.HandleFunc("GET /api/v1/whoami", s.handleWhoami)
	mux.HandleFunc("GET /api/v1/sessions", s.handleSessions)
	mux.HandleFunc("GET /api/v1/sessions/{name}", s.handleSession)
	mux.HandleFunc("GET /api/v1/sessions/{name}/screen", s.handleScreen)
	mux.HandleFunc("GET /api/v1/sessions/{name}/resources", s.handleResources)
	mux.HandleFunc("GET /api/v1/crashes", s.handleCrashes)
	mux.HandleFunc("GET /api/v1/usage", s.handleUsage)
	mux.HandleFunc("GET /api/v1/inbox", s.handleInbox)
	mux.HandleFunc("GET /api/v1/events", s.handleEvents)
	mux.HandleFunc("GET /api/v1/tasks", s.handleTasks)
	mux.HandleFunc("GET /api/v1/tasks/{id}", s.handleTask)
	mux.HandleFunc("GET /api/v1/tasks/{id}/diff", s.handleTaskDiff)
	mux.HandleFunc("POST /api/v1/tasks/{id}/{verb}", s.handleTaskVerb)
	mux.HandleFunc("POST /api/v1/sessions/{name}/answer", s.handleAnswer)
	mux.HandleFunc("POST /api/v1/sessions/{name}/input", s.handleInput)
	mux.HandleFunc("POST /api/v1/sessions/{name}/{verb}", s.handleVerb)
	return s.guard(mux)
}

// principalKey carries the request's Principal in its context.
type principalKey struct{}

func principal(r *http.Request) auth.Principal {
	p, _ := r.Context().Value(principalKey{}).(auth.Principal)
	return p
}

// guard runs every check before a route: headers, Host, login,
// authentication, and for a state change its scope, Origin and CSRF token.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !auth.HostAllowed(r.Host, s.Addr(), s.allowHosts) {
			s.log.Warn("web: request for a host not served", "host", r.Host, "remote", r.RemoteAddr)
			http.Error(w, "unknown host", http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Path == "/login" {
			s.handleLogin(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, answerPrefix) {
			s.handleAnswerLink(w, r)
			return
		}
		p, err := s.auth.Authenticate(r)
		if errors.Is(err, auth.ErrUnauthenticated) {
			s.refuse(w, r)
			return
		}
		if err != nil {
			// A person's credential the store cannot confirm now is
			// refused: never taken on trust while it may be revoked.
			s.log.Warn("web: a login could not be checked; refused", "remote", r.RemoteAddr, "path", r.URL.Path, "err", err)
			const msg = "your login cannot be checked now (the store is away): try again once it is back"
			if strings.HasPrefix(r.URL.Path, "/api/") {
				replyError(w, http.StatusServiceUnavailable, msg)
				return
			}
			http.Error(w, "herd console: "+msg, http.StatusServiceUnavailable)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !auth.OriginAllowed(p, r.Header.Get("Origin"), r.Host, s.o.Config.TLS()) {
				s.log.Warn("web: cross-origin request refused", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr, "path", r.URL.Path)
				replyError(w, http.StatusForbidden, "cross-origin request refused")
				return
			}
			if !auth.CheckCSRF(p, r) {
				s.log.Warn("web: request without its csrf token refused", "remote", r.RemoteAddr, "path", r.URL.Path)
				replyError(w, http.StatusForbidden, "missing or wrong csrf token")
				return
			}
			if !p.CanOperate() {
				if p.User != "" {
					replyError(w, http.StatusForbidden, "user "+p.User+" is read-only: it can see everything and change nothing")
					return
				}
				replyError(w, http.StatusForbidden, "read-only login: log in with `herd web url` (without --read-only) to act")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// refuse answers an unauthenticated request, slowly when it tried a
// credential.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" || hasCookie(r) {
		s.log.Warn("web: authentication failed", "remote", r.RemoteAddr, "path", r.URL.Path)
		s.slow(r)
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		replyError(w, http.StatusUnauthorized, "not logged in: run `herd web url` and open the link it prints, or send the token of web.token as a bearer token")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte("herd console: not logged in.\n\nRun `herd web url` on the daemon's host and open the link it prints (valid 5 minutes, once).\n"))
}

func hasCookie(r *http.Request) bool {
	_, err := r.Cookie(auth.CookieName)
	return err == nil
}

// slow waits out the failed-login delay, or the request's end. Failures
// wait one after the other: guesses sent in parallel are not faster.
func (s *Server) slow(r *http.Request) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	t := time.NewTimer(s.o.FailDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// handleLogin serves a login link. Its GET (and HEAD) spends nothing: it
// answers a page whose "Log in" button POSTs the link's nonce, so a chat
// app's preview of the link, which only GETs it, cannot log in. The POST,
// from the console's own origin, spends the link and sets the session
// cookie.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		t := r.URL.Query().Get("t")
		if !s.auth.Valid(t) {
			s.loginRefused(w, r)
			return
		}
		formPage(w)
		page(w, http.StatusOK, "Log in",
			`<form method="post" action="/login"><input type="hidden" name="t" value="`+htmlEscape(t)+`">`+
				`<button type="submit" id="login">Log in</button></form>`+
				`<p>This link works once, within `+strconv.Itoa(int(auth.LinkTTL/time.Minute))+` minutes of being made.</p>`)
	case http.MethodPost:
		s.postLogin(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// formPage lets a page's form POST say where it comes from: under the
// console's no-referrer policy a browser sends "Origin: null" with a
// form's POST, which the Origin check refuses. Same-origin keeps the
// referrer (the link, nonce included) from every other site.
func formPage(w http.ResponseWriter) {
	w.Header().Set("Referrer-Policy", "same-origin")
}

// maxLoginForm bounds a login POST's body: its form holds one nonce.
const maxLoginForm = 4 << 10

// postLogin spends a login link and sets the session cookie. The page it
// answers moves on by a meta refresh: a same-site navigation, so the
// SameSite=Strict cookie goes with it even when the link was opened from
// another site.
func (s *Server) postLogin(w http.ResponseWriter, r *http.Request) {
	if !auth.OriginAllowed(auth.Principal{CSRF: "form"}, r.Header.Get("Origin"), r.Host, s.o.Config.TLS()) {
		s.log.Warn("web: login posted from another origin", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		page(w, http.StatusForbidden, "Refused", "<p>Cross-origin request refused.</p>")
		return
	}
	if !s.parseSmallForm(w, r, maxLoginForm) {
		return
	}
	id, next, err := s.auth.Login(r.Context(), r.PostForm.Get("t"))
	if errors.Is(err, auth.ErrUnauthenticated) {
		s.loginRefused(w, r)
		return
	}
	if err != nil {
		s.log.Warn("web: a login link could not be checked; refused", "remote", r.RemoteAddr, "err", err)
		page(w, http.StatusServiceUnavailable, "Try again", "<p>This login cannot be checked now (the store is away); the link is not spent: try again once it is back.</p>")
		return
	}
	s.log.Info("web: login", "remote", r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{Name: auth.CookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.o.Config.TLS(), MaxAge: int(auth.SessionTTL / time.Second)})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	esc := htmlEscape(next)
	w.Write([]byte(`<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=` + esc +
		`"><title>herd</title><p>Logged in. <a href="` + esc + `">Continue</a></p>`))
}

// loginRefused answers a login link that is unknown, spent or expired,
// slowly.
func (s *Server) loginRefused(w http.ResponseWriter, r *http.Request) {
	s.log.Warn("web: login with an unknown, spent or expired link", "remote", r.RemoteAddr)
	s.slow(r)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte("herd console: this login link is unknown, spent or expired.\n\nRun `herd web url` for a new one.\n"))
}

// serveFile serves one embedded file.
func (s *Server) serveFile(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := fs.ReadFile(static(), name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Write(b)
	}
}
