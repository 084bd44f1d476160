package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrNoDaemon means nothing answers on the socket.
var ErrNoDaemon = errors.New("no daemon")

// Client talks to a daemon over its unix socket.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the daemon listening on socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// Socket is the path the client dials.
func (c *Client) Socket() string { return c.socket }

// Do sends a request with an optional JSON body and decodes the JSON reply
// into out (when non-nil; a *[]byte receives the raw body). A non-2xx reply becomes an error carrying the
// daemon's message.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if raw, ok := out.(*[]byte); ok {
		*raw, err = io.ReadAll(resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Each GETs path, whose reply is a JSON array, and calls fn with each
// element as it is read: a long reply is never held whole in memory.
func (c *Client) Each(ctx context.Context, path string, query url.Values, fn func(json.RawMessage) error) error {
	resp, err := c.send(ctx, http.MethodGet, path, query, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	if tok, err := dec.Token(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	} else if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%s: expected a JSON array, got %v", path, tok)
	}
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%s: reply cut short: %w", path, err)
	}
	return nil
}

// send sends one request and returns its 2xx reply; any other reply is a
// *StatusError.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := "http://herd" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if isNoDaemon(err) {
			return nil, fmt.Errorf("%w: nothing answers on %s", ErrNoDaemon, c.socket)
		}
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var e Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, &StatusError{Code: resp.StatusCode, Message: e.Error}
		}
		return nil, &StatusError{Code: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	}
	return resp, nil
}

// StatusError is a non-2xx reply.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return e.Message }

// IsNotFound reports whether err is a 404 reply.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

func isNoDaemon(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// Ping reports whether a daemon answers on the socket within timeout.
func (c *Client) Ping(ctx context.Context, timeout time.Duration) (Health, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var h Health
	err := c.Do(ctx, http.MethodGet, "/v1/health", nil, nil, &h)
	return h, err
}

// SocketPath is where the daemon of stateDir listens.
func SocketPath(stateDir string) string { return filepath.Join(stateDir, "herd.sock") }
