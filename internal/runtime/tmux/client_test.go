package tmux

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var errTest = errors.New("exit status 1")

// TestClassify covers every message tmux 3.2 to 3.5 writes on stderr for a
// missing server, socket, session, window or pane, an empty server, an
// exiting server and a duplicate name, in the words of its source (client.c,
// cmd-find.c, options.c, cmd-*-environment.c, cmd-new-session.c), plus the
// older wordings still matched and look-alikes that must not match.
func TestClassify(t *testing.T) {
	tests := []struct {
		stderr string
		want   error
	}{
		// client.c: connecting.
		{"no server running on /tmp/tmux-0/x\n", ErrNoServer},
		{"error connecting to /tmp/tmux-0/x (No such file or directory)", ErrNoSocket},
		{"error connecting to /tmp/tmux-0/x (Connection refused)", ErrNoServer},
		{"error connecting to /tmp/tmux-0/x (Permission denied)", nil},
		{"error connecting to /tmp/tmux-0/x (Not a directory)", nil},
		{"error connecting to /tmp/tmux-0/x (Resource temporarily unavailable)", nil},
		{"error connecting to /tmp/tmux-0/x (Connection timed out)", nil},
		// client.c: the server went away under a connected client.
		{"server exited unexpectedly", ErrServerExited},
		{"server exited\n", ErrServerExited},
		{"lost server", ErrServerExited},
		// cmd-find.c: no session at all on the server, whatever the target.
		{"no current target", ErrEmptyServer},
		{"no current target\n", ErrEmptyServer},
		// options.c and cmd-*-environment.c, with no target on an empty server.
		{"no current session", ErrEmptyServer},
		{"no current window", ErrEmptyServer},
		{"no current pane", ErrEmptyServer},
		// cmd-find.c: the target names nothing.
		{"can't find session: =x", ErrNoSession},
		{"can't find session: x", ErrNoSession},
		{"can't find window: =x:", ErrNoWindow},
		{"can't find window: 3", ErrNoWindow},
		{"can't find pane: %9", ErrNoPane},
		// options.c, cmd-set-environment.c, cmd-show-environment.c.
		{"no such session: =x:", ErrNoSession},
		{"no such window: =x:", ErrNoWindow},
		{"no such pane: %9", ErrNoPane},
		// set-option with a missing target prints the resolver's line first.
		{"can't find session: =x\nno such window: =x:", ErrNoSession},
		{"can't find pane: %9\nno such pane: %9\n", ErrNoPane},
		// Older tmux.
		{"session not found: x", ErrNoSession},
		// cmd-new-session.c.
		{"duplicate session: x", ErrDuplicateSession},
		// Not a kind.
		{"command too long", nil},
		{"unknown command: frob", nil},
		{"protocol version mismatch (client 8, server 7)", nil},
		{"server version is too old for client", nil},
		{"invalid option: x", nil},
		{"no current client", nil},
		{"can't find client: /dev/pts/3", nil},
		{"", nil},
		{"\n\n", nil},
		// Look-alikes: a kind word inside another message is not that kind.
		{"open terminal failed: no current target", nil},
		{"the server exited unexpectedly yesterday", nil},
		{"no current targets", nil},
	}
	for _, tt := range tests {
		if got := classify(tt.stderr); got != tt.want {
			t.Errorf("[%q] expected %v … got %v", tt.stderr, tt.want, got)
		}
	}
}

// TestEmptyServerIsEveryNotFound: an empty server has no session, window or
// pane of any name, and is still a running server.
func TestEmptyServerIsEveryNotFound(t *testing.T) {
	err := error(callError([]string{"has-session"}, "no current target\n", errTest, nil))
	for _, kind := range []error{ErrEmptyServer, ErrNoSession, ErrNoWindow, ErrNoPane} {
		if !errors.Is(err, kind) {
			t.Errorf("expected %v to match %v … it does not", err, kind)
		}
	}
	for _, kind := range []error{ErrNoServer, ErrNoSocket, ErrServerExited, ErrDuplicateSession} {
		if errors.Is(err, kind) {
			t.Errorf("expected %v not to match %v … it does", err, kind)
		}
	}
}

func TestCallError(t *testing.T) {
	args := []string{"-u", "list-panes"}
	tests := []struct {
		name       string
		stderr     string
		ctxErr     error
		noServer   bool
		noSocket   bool
		noSession  bool
		deadline   bool
		wantInText string
	}{
		{name: "no server", stderr: "no server running on /tmp/tmux-0/x\n", noServer: true, wantInText: "no server running on /tmp/tmux-0/x"},
		{name: "no socket file", stderr: "error connecting to /tmp/tmux-0/x (No such file or directory)", noServer: true, noSocket: true, wantInText: "No such file or directory"},
		{name: "permission denied", stderr: "error connecting to /tmp/tmux-0/x (Permission denied)", wantInText: "Permission denied"},
		{name: "no session", stderr: "can't find session: =x", noSession: true, wantInText: "can't find session"},
		{name: "timeout wins over stderr", stderr: "no server running on /x", ctxErr: context.DeadlineExceeded, deadline: true},
		{name: "other", stderr: "duplicate session: x", wantInText: "duplicate session"},
	}
	for _, tt := range tests {
		err := error(callError(args, tt.stderr, errTest, tt.ctxErr))
		if got := errors.Is(err, ErrNoServer); got != tt.noServer {
			t.Errorf("[%s] expected ErrNoServer %v … got %v (%v)", tt.name, tt.noServer, got, err)
		}
		if got := errors.Is(err, ErrNoSocket); got != tt.noSocket {
			t.Errorf("[%s] expected ErrNoSocket %v … got %v (%v)", tt.name, tt.noSocket, got, err)
		}
		if got := errors.Is(err, ErrNoSession); got != tt.noSession {
			t.Errorf("[%s] expected ErrNoSession %v … got %v (%v)", tt.name, tt.noSession, got, err)
		}
		if got := errors.Is(err, context.DeadlineExceeded); got != tt.deadline {
			t.Errorf("[%s] expected deadline %v … got %v (%v)", tt.name, tt.deadline, got, err)
		}
		var ce *CallError
		if !errors.As(err, &ce) || !slices.Equal(ce.Args, args) {
			t.Errorf("[%s] expected a *CallError with the args … got %#v", tt.name, err)
		}
		if !strings.Contains(err.Error(), tt.wantInText) {
			t.Errorf("[%s] expected %q in the message … got %q", tt.name, tt.wantInText, err.Error())
		}
	}
}

func TestCallErrorTruncatesArgs(t *testing.T) {
	err := callError([]string{"send-keys", strings.Repeat("x", 10000)}, "boom", errTest, nil)
	if n := len(err.Error()); n > 400 {
		t.Errorf("expected a short message … got %d bytes", n)
	}
}

func TestEscapeArg(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"", ""},
		{";", `\;`},
		{"a;", `a\;`},
		{`a\;`, `a\\;`},
		{"a;b", "a;b"},
		{"-n", "-n"},
	}
	for _, tt := range tests {
		if got := escapeArg(tt.in); got != tt.want {
			t.Errorf("[%q] expected %q … got %q", tt.in, tt.want, got)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([][]string{{"new-session", "-s", "a;"}, {"set-option", ";"}})
	want := []string{"new-session", "-s", `a\;`, ";", "set-option", `\;`}
	if !slices.Equal(got, want) {
		t.Errorf("expected %q … got %q", want, got)
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"worker-0", true},
		{"wörk 1", true},
		{"a#b", true},
		{"", false},
		{"a:b", false},
		{"a.b", false},
		{"a\tb", false},
		{"a\nb", false},
		{"\xff", false},
	}
	for _, tt := range tests {
		if err := checkName(tt.name); (err == nil) != tt.ok {
			t.Errorf("[%q] expected ok %v … got %v", tt.name, tt.ok, err)
		}
	}
}

func TestLaunchArgv(t *testing.T) {
	tests := []struct {
		in   []string
		want []string // nil: error
	}{
		{[]string{"sleep", "30"}, []string{"sleep", "30"}},
		{[]string{"claude"}, []string{"env", "--", "claude"}},
		{[]string{"/opt/my agent"}, []string{"env", "--", "/opt/my agent"}},
		{[]string{"-weird"}, []string{"env", "--", "-weird"}},
		{nil, nil},
		{[]string{""}, nil},
		{[]string{"a=b"}, nil},
		{[]string{"sh", "a\x00b"}, nil},
	}
	for _, tt := range tests {
		got, err := launchArgv(tt.in)
		if tt.want == nil {
			if err == nil {
				t.Errorf("[%q] expected an error … got %q", tt.in, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("[%q] expected %q … got %q, %v", tt.in, tt.want, got, err)
		}
	}
}

// TestBadInputNeverRunsTmux checks that invalid arguments fail before any
// process starts: the binary does not exist, so reaching it would give a
// different error.
func TestBadInputNeverRunsTmux(t *testing.T) {
	c := &Client{Binary: "/nonexistent/tmux"}
	ctx := context.Background()
	dir := t.TempDir()
	tests := []struct {
		name string
		call func() error
	}{
		{"empty name", func() error { _, err := c.NewSession(ctx, "", dir, nil, []string{"true"}); return err }},
		{"name with colon", func() error { _, err := c.NewSession(ctx, "a:b", dir, nil, []string{"true"}); return err }},
		{"empty argv", func() error { _, err := c.NewSession(ctx, "a", dir, nil, nil); return err }},
		{"relative workdir", func() error { _, err := c.NewSession(ctx, "a", "rel", nil, []string{"true"}); return err }},
		{"missing workdir", func() error { _, err := c.NewSession(ctx, "a", dir+"/nope", nil, []string{"true"}); return err }},
		{"bad env name", func() error {
			_, err := c.NewSession(ctx, "a", dir, map[string]string{"A=B": "x"}, []string{"true"})
			return err
		}},
		{"empty env name", func() error {
			_, err := c.NewSession(ctx, "a", dir, map[string]string{"": "x"}, []string{"true"})
			return err
		}},
		{"kill empty name", func() error { return c.KillSession(ctx, "") }},
		{"has empty name", func() error { _, err := c.HasSession(ctx, ""); return err }},
		{"send empty name", func() error { return c.SendText(ctx, "", "x", true) }},
		{"capture bad name", func() error { _, err := c.Capture(ctx, "a.b", 10); return err }},
	}
	for _, tt := range tests {
		err := tt.call()
		if err == nil {
			t.Errorf("[%s] expected an error … got nil", tt.name)
			continue
		}
		if errors.Is(err, exec.ErrNotFound) || strings.Contains(err.Error(), "/nonexistent/tmux") {
			t.Errorf("[%s] expected validation to fail first … got %v", tt.name, err)
		}
	}
}

func TestAttachCommand(t *testing.T) {
	tests := []struct {
		c    *Client
		want []string
	}{
		{&Client{Socket: "herd"}, []string{"tmux", "-L", "herd", "attach-session", "-t", "=w-0"}},
		{&Client{Binary: "/usr/bin/tmux"}, []string{"/usr/bin/tmux", "attach-session", "-t", "=w-0"}},
	}
	for _, tt := range tests {
		if got := tt.c.AttachCommand("w-0").Args; !slices.Equal(got, tt.want) {
			t.Errorf("[%q %q] expected %q … got %q", tt.c.Binary, tt.c.Socket, tt.want, got)
		}
	}
}

// TestSendKeysPaneRefusesText: only key names are pressed, never text
// (a flag, a ';' command separator, spaces) and never into a non-pane.
func TestSendKeysPaneRefusesText(t *testing.T) {
	c := &Client{}
	for _, keys := range [][]string{{"C-u", "hello world"}, {"-l"}, {";"}, {"C-u;"}, {""}, {"Enter\n"}} {
		if err := c.SendKeysPane(context.Background(), "%1", keys...); err == nil {
			t.Errorf("[%q] expected an error, got none", keys)
		}
	}
	if err := c.SendKeysPane(context.Background(), "agent", "C-u"); err == nil {
		t.Errorf("[not a pane id] expected an error, got none")
	}
	// No key: nothing to run, no error (no tmux is reached).
	if err := c.SendKeysPane(context.Background(), "%1"); err != nil {
		t.Errorf("[no keys] expected no error, got %v", err)
	}
	for _, k := range []string{"C-u", "C-e", "Escape", "End", "M-Enter", "F1"} {
		if !keyNameRE.MatchString(k) {
			t.Errorf("[%s] expected a key name", k)
		}
	}
}
