package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"herd/internal/api"
)

// do sends one request to the daemon (see api.Client.Do) and turns its
// errors into the line a user reads: no daemon -> how to start one, 404 on a
// session or role path -> "session NAME not found".
func (g *globals) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	return explainPath(c.Do(ctx, method, path, q, body, out), g, path)
}

// getJSON GETs path and decodes the reply into out.
func getJSON(ctx context.Context, g *globals, path string, out any) error {
	return g.do(ctx, http.MethodGet, path, nil, nil, out)
}

// explainPath is explain, plus: a 404 on /v1/sessions/NAME...,
// /v1/roles/NAME..., /v1/tasks/ID... or /v1/web/users/NAME... names the thing once, whatever words the daemon used.
func explainPath(err error, g *globals, path string) error {
	if err == nil {
		return nil
	}
	if api.IsNotFound(err) {
		if what, name, ok := pathObject(path); ok {
			return &namedError{msg: fmt.Sprintf("%s %s not found", what, name), err: err}
		}
	}
	return explain(err, g)
}

// pathObject reads the object an API path names: ("session", "w-0") for
// /v1/sessions/w-0/logs.
func pathObject(path string) (what, name string, ok bool) {
	for prefix, kind := range map[string]string{"/v1/sessions/": "session", "/v1/roles/": "role", "/v1/tasks/": "task", "/v1/web/users/": "user"} {
		rest, found := strings.CutPrefix(path, prefix)
		if !found || rest == "" {
			continue
		}
		seg, _, _ := strings.Cut(rest, "/")
		n, err := url.PathUnescape(seg)
		if err != nil || n == "" {
			return "", "", false
		}
		return kind, n, true
	}
	return "", "", false
}

// namedError replaces the daemon's words with the CLI's, keeping the reply
// underneath for errors.As (api.IsNotFound).
type namedError struct {
	msg string
	err error
}

func (e *namedError) Error() string { return e.msg }
func (e *namedError) Unwrap() error { return e.err }
