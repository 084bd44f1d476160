package top

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"herd/internal/api"
)

// Source is what the view reads from, and acts through: the daemon.
type Source interface {
	// Sessions lists every session, as `herd get sessions -o json`.
	Sessions(ctx context.Context) ([]api.SessionView, error)
	// Session describes one, with its /proc diagnostics.
	Session(ctx context.Context, name string) (api.SessionDetail, error)
	// Logs returns the last tail lines of a session's output.
	Logs(ctx context.Context, name string, tail int) (string, error)
	// Stop, Restart, Resume and Inject act on a session and return the
	// daemon's one-line result.
	Stop(ctx context.Context, name string) (string, error)
	Restart(ctx context.Context, name string) (string, error)
	Resume(ctx context.Context, name string) (string, error)
	Inject(ctx context.Context, name, text string) (string, error)
}

// ClientSource is a Source over the daemon's API.
type ClientSource struct {
	C *api.Client
}

var _ Source = ClientSource{}

func sessionPath(name, suffix string) string {
	return "/v1/sessions/" + url.PathEscape(name) + suffix
}

// Sessions implements Source.
func (s ClientSource) Sessions(ctx context.Context) ([]api.SessionView, error) {
	var v []api.SessionView
	err := s.C.Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &v)
	return v, err
}

// Session implements Source.
func (s ClientSource) Session(ctx context.Context, name string) (api.SessionDetail, error) {
	var d api.SessionDetail
	err := s.C.Do(ctx, http.MethodGet, sessionPath(name, ""), nil, nil, &d)
	return d, err
}

// Logs implements Source.
func (s ClientSource) Logs(ctx context.Context, name string, tail int) (string, error) {
	var b []byte
	q := url.Values{"tail": {strconv.Itoa(tail)}}
	err := s.C.Do(ctx, http.MethodGet, sessionPath(name, "/logs"), q, nil, &b)
	return string(b), err
}

func (s ClientSource) post(ctx context.Context, path string, body any) (string, error) {
	var r api.Result
	err := s.C.Do(ctx, http.MethodPost, path, nil, body, &r)
	return r.Message, err
}

// Stop implements Source.
func (s ClientSource) Stop(ctx context.Context, name string) (string, error) {
	return s.post(ctx, sessionPath(name, "/stop"), nil)
}

// Restart implements Source: a fresh incarnation through the stop path,
// as `herd restart NAME`.
func (s ClientSource) Restart(ctx context.Context, name string) (string, error) {
	var r api.RestartResult
	err := s.C.Do(ctx, http.MethodPost, sessionPath(name, "/restart"), nil, api.RestartRequest{}, &r)
	return r.Message, err
}

// Resume implements Source.
func (s ClientSource) Resume(ctx context.Context, name string) (string, error) {
	return s.post(ctx, sessionPath(name, "/resume"), nil)
}

// Inject implements Source.
func (s ClientSource) Inject(ctx context.Context, name, text string) (string, error) {
	return s.post(ctx, sessionPath(name, "/inject"), api.InjectRequest{Text: text, Enter: true})
}
