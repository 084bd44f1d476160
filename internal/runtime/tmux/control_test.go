package tmux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestControlLine(t *testing.T) {
	tests := []struct {
		cmds [][]string
		want string
		ok   bool
	}{
		{[][]string{{"list-panes", "-a", "-F", "#{session_name}\t#{pane_pid}"}}, "list-panes '-a' '-F' '#{session_name}\t#{pane_pid}'", true},
		{[][]string{{"kill-session", "-t", "=it's:"}}, `kill-session '-t' '=it'\''s:'`, true},
		{[][]string{{"new-session", "-s", "a"}, {"set-option", "x;"}}, "new-session '-s' 'a' ; set-option 'x;'", true},
		{[][]string{{"send-keys", "-l", "--", "$HOME ~ # {x} ; \\"}}, `send-keys '-l' '--' '$HOME ~ # {x} ; \'`, true},
		{[][]string{{"send-keys", "-l", "--", ""}}, "send-keys '-l' '--' ''", true},
		{[][]string{{"send-keys", "-l", "--", "a\nb"}}, "", false},
		{[][]string{{"send-keys", "-l", "--", "a\rb"}}, "", false},
		{[][]string{{"send-keys", "-l", "--", "a\x00b"}}, "", false},
		{[][]string{{"capture-pane", "-p"}}, "", false},
		{[][]string{{"list-panes"}, {"load-buffer", "-"}}, "", false},
		{[][]string{{"kill-server"}}, "", false},
		{[][]string{{}}, "", false},
		{nil, "", false},
	}
	for _, tt := range tests {
		got, ok := controlLine(tt.cmds)
		if got != tt.want || ok != tt.ok {
			t.Errorf("[%q] expected %q, %v … got %q, %v", tt.cmds, tt.want, tt.ok, got, ok)
		}
	}
}

// newControlClient is newClient with the control transport, closed
// before the server is killed.
func newControlClient(t testing.TB) *Client {
	t.Helper()
	c := newClient(t)
	c.Control = true
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// connected starts a server on c (a session named keep) and waits until
// c's control connection is up.
func connected(t testing.TB, c *Client) {
	t.Helper()
	if ok, _ := c.HasSession(ctxT(t), "keep"); !ok {
		if _, err := c.NewSession(ctxT(t), "keep", "", nil, []string{"sleep", "600"}); err != nil {
			t.Fatalf("new session: %v", err)
		}
	}
	poll(t, "the control connection", func() bool {
		if _, err := c.HasSession(ctxT(t), "keep"); err != nil {
			t.Fatalf("has-session: %v", err)
		}
		return c.Connected()
	})
}

// TestControlSameAsExec: odd session names, workdirs, env values and
// argv reach tmux the same over the control connection as through a tmux
// process: quoted for tmux's command parser, they are neither expanded
// ($VAR, ~, #{…}), nor split (;), nor cut (#).
func TestControlSameAsExec(t *testing.T) {
	ctl := newControlClient(t)
	connected(t, ctl)
	ex := &Client{Socket: ctl.Socket, Timeout: ctl.Timeout}
	odd := []string{"a b", "it's", `"q"`, "$HOME", "~", "#{pane_pid}", "#c", "x;", `b\;`, ";", "{x}", `\`, "%1", "-x", "wörk", "\ttab", ""}
	outDir := t.TempDir()
	wd := filepath.Join(t.TempDir(), `wd 'q' $HOME #{x} #c ; ~ \ {a} x;`)
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `{ pwd; printf '%s\n' "$HERD_ODD"; printf '%s|' "$@"; echo; } > "$HERD_OUT/$0"; exec sleep 60`
	for i, name := range []string{"a b", "it's", "~x", "#{x}", "#c", "x;", "{a}", "wörk", `"q"`} {
		out := map[string]string{}
		for _, tr := range []struct {
			tag string
			c   *Client
		}{{"exec", ex}, {"control", ctl}} {
			before := tr.c.Stats()
			session := tr.tag + " " + name
			env := map[string]string{"HERD_OUT": outDir, "HERD_ODD": strings.Join(odd, "|")}
			argv := append([]string{"sh", "-c", script, fmt.Sprintf("%s-%d", tr.tag, i)}, odd...)
			if _, err := tr.c.NewSession(ctxT(t), session, wd, env, argv); err != nil {
				t.Fatalf("[%s %q] new session: %v", tr.tag, name, err)
			}
			after := tr.c.Stats()
			if tr.tag == "control" && (after.Control == before.Control || after.Exec != before.Exec) {
				t.Errorf("[%q] expected the launch over the control connection … got %+v then %+v", name, before, after)
			}
			got := readFileEventually(t, filepath.Join(outDir, fmt.Sprintf("%s-%d", tr.tag, i)), func(b []byte) bool { return bytes.HasSuffix(b, []byte("|\n")) })
			out[tr.tag] = string(got)
			if ok, err := tr.c.HasSession(ctxT(t), session); !ok || err != nil {
				t.Errorf("[%s] expected session %q … got %v, %v", tr.tag, session, ok, err)
			}
			if p, ok := findPane(t, tr.c, session); !ok || p.Dead {
				t.Errorf("[%s] expected %q listed alive … got %+v, %v", tr.tag, session, p, ok)
			}
			if err := tr.c.KillSession(ctxT(t), session); err != nil {
				t.Errorf("[%s] kill %q: %v", tr.tag, session, err)
			}
		}
		want := wd + "\n" + strings.Join(odd, "|") + "\n" + strings.Join(odd, "|") + "|\n"
		if out["exec"] != want || out["control"] != want {
			t.Errorf("[%q] expected %q both ways … got exec %q, control %q", name, want, out["exec"], out["control"])
		}
	}
	// Typed text, with the same characters, lands the same.
	for _, tr := range []struct {
		tag string
		c   *Client
	}{{"exec", ex}, {"control", ctl}} {
		file := filepath.Join(outDir, "typed-"+tr.tag)
		if _, err := tr.c.NewSession(ctxT(t), "typed "+tr.tag, "", nil, []string{"sh", "-c", "head -n 1 > " + file + "; exec sleep 60"}); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(odd[:len(odd)-1], "|")
		if err := tr.c.SendText(ctxT(t), "typed "+tr.tag, text, true); err != nil {
			t.Fatalf("[%s] send text: %v", tr.tag, err)
		}
		got := readFileEventually(t, file, func(b []byte) bool { return bytes.HasSuffix(b, []byte("\n")) })
		if string(got) != text+"\n" {
			t.Errorf("[%s] expected %q typed … got %q", tr.tag, text+"\n", got)
		}
	}
}

// TestControlErrorsClassified: an %error block is read like stderr.
func TestControlErrorsClassified(t *testing.T) {
	c := newControlClient(t)
	connected(t, c)
	before := c.Stats()
	err := c.KillSession(ctxT(t), "nosuch")
	if !errors.Is(err, ErrNoSession) {
		t.Errorf("expected ErrNoSession … got %v", err)
	}
	var ce *CallError
	if !errors.As(err, &ce) || !strings.Contains(ce.Stderr, "can't find session: nosuch") {
		t.Errorf("expected tmux's words in the error … got %v", err)
	}
	if _, err := c.NewSession(ctxT(t), "keep", "", nil, []string{"sleep", "1"}); !errors.Is(err, ErrDuplicateSession) {
		t.Errorf("expected ErrDuplicateSession … got %v", err)
	}
	if panes, err := c.ListSession(ctxT(t), "nosuch"); err != nil || len(panes) != 0 {
		t.Errorf("expected an empty listing … got %v, %v", panes, err)
	}
	// The line after a failed one is answered as usual.
	if ok, err := c.HasSession(ctxT(t), "keep"); !ok || err != nil {
		t.Errorf("expected keep … got %v, %v", ok, err)
	}
	if after := c.Stats(); after.Exec != before.Exec || after.Control-before.Control != 4 {
		t.Errorf("expected 4 calls over the connection, none through exec … got %+v then %+v", before, after)
	}
}

// TestControlConcurrentCalls: many goroutines share the connection; each
// gets its own answer.
func TestControlConcurrentCalls(t *testing.T) {
	c := newControlClient(t)
	connected(t, c)
	const n = 20
	for i := range n {
		if _, err := c.NewSession(ctxT(t), fmt.Sprintf("s%d", i), "", nil, []string{"sleep", "600"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 50 {
				name := fmt.Sprintf("s%d", (g*7+r)%n)
				panes, err := c.ListSession(context.Background(), name)
				if err != nil || len(panes) != 1 || panes[0].Session != name {
					t.Errorf("[%s] expected its one pane … got %+v, %v", name, panes, err)
					return
				}
				if r%10 == 0 {
					if err := c.KillSession(context.Background(), "nosuch"); !errors.Is(err, ErrNoSession) {
						t.Errorf("expected ErrNoSession … got %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if s := c.Stats(); s.Control < 8*50 {
		t.Errorf("expected the calls over the connection … got %+v", s)
	}
}

// TestControlSessionHidden: the control session is in no snapshot, and
// Close removes it, so the server exits with its last agent session as
// before.
func TestControlSessionHidden(t *testing.T) {
	c := newControlClient(t)
	connected(t, c)
	rt := New(c)
	snap := rt.List(ctxT(t))
	if _, ok := snap.Panes[ControlSession]; ok || snap.Err != nil || len(snap.Panes["keep"]) != 1 || snap.ServerPID == 0 {
		t.Errorf("expected keep alone in the snapshot … got %+v", snap)
	}
	if ok, _ := c.HasSession(ctxT(t), ControlSession); !ok {
		t.Errorf("expected the control session on the server")
	}
	if err := c.KillSession(ctxT(t), "keep"); err != nil {
		t.Fatal(err)
	}
	if snap := rt.List(ctxT(t)); snap.Err != nil || len(snap.Panes) != 0 || snap.NoServer {
		t.Errorf("expected an empty snapshot of a running server … got %+v", snap)
	}
	if err := rt.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	poll(t, "the server's exit", func() bool {
		_, err := c.ListPanes(ctxT(t))
		return errors.Is(err, ErrNoServer)
	})
	if c.Connected() {
		t.Error("expected no connection after Close")
	}
}

// TestControlNeverStartsServer: with no server, calls go through exec
// and no connection starts one.
func TestControlNeverStartsServer(t *testing.T) {
	c := newControlClient(t)
	for range 5 {
		if _, err := c.ListPanes(ctxT(t)); !errors.Is(err, ErrNoServer) {
			t.Fatalf("expected ErrNoServer … got %v", err)
		}
	}
	// A connection attempt, were one started, has had its time.
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(socketPath(c)); err == nil || c.Connected() || c.Stats().Connects != 0 {
		t.Errorf("expected no server and no connection … got %+v", c.Stats())
	}
}

// TestControlServerKilled: the connection ends with its server; calls go
// through exec, and a new server gets a new connection.
func TestControlServerKilled(t *testing.T) {
	c := newControlClient(t)
	connected(t, c)
	if err := exec.Command("tmux", "-L", c.Socket, "kill-server").Run(); err != nil {
		t.Fatal(err)
	}
	poll(t, "the connection's end", func() bool { return !c.Connected() })
	if _, err := c.ListPanes(ctxT(t)); !errors.Is(err, ErrNoServer) {
		t.Errorf("expected ErrNoServer … got %v", err)
	}
	connected(t, c)
	if s := c.Stats(); s.Connects != 2 || s.Closes != 1 {
		t.Errorf("expected 2 connections, 1 ended … got %+v", s)
	}
}

// TestControlWedgedServer: a server that stops answering (SIGSTOP) makes
// a call over the connection time out; the connection is closed, pending
// calls fail at once, later calls go through exec (and time out too, but
// never freeze), and once the server answers again the connection comes
// back.
func TestControlWedgedServer(t *testing.T) {
	c := newControlClient(t)
	connected(t, c)
	p, ok := findPane(t, c, "keep")
	if !ok {
		t.Fatal("keep not listed")
	}
	if err := syscall.Kill(p.ServerPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			syscall.Kill(p.ServerPID, syscall.SIGCONT)
		}
	})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	start := time.Now()
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(300+300*i)*time.Millisecond)
			defer cancel()
			_, errs[i] = c.ListSession(ctx, "keep")
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("expected every call to end by its deadline … took %v", d)
	}
	if !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("expected the first call to time out … got %v", errs[0])
	}
	for i, err := range errs[1:] {
		if err == nil {
			t.Errorf("[call %d] expected an error while the server is stopped", i+1)
		}
	}
	poll(t, "the connection closed", func() bool { return !c.Connected() })
	before := c.Stats()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := c.ListSession(ctx, "keep")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || c.Stats().Exec == before.Exec {
		t.Errorf("expected an exec call timing out … got %v, %+v", err, c.Stats())
	}
	syscall.Kill(p.ServerPID, syscall.SIGCONT)
	stopped = false
	connected(t, c)
	if panes, err := c.ListSession(ctxT(t), "keep"); err != nil || len(panes) != 1 {
		t.Errorf("expected keep listed again … got %v, %v", panes, err)
	}
}

// TestControlFakeWithoutControlMode: a tmux that refuses -C (a wrapper
// in front of the real one) leaves every call on exec, working.
func TestControlFakeWithoutControlMode(t *testing.T) {
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux not installed")
	}
	bin := filepath.Join(t.TempDir(), "tmux")
	c := newControlClient(t)
	script := "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -C ] && { echo 'no control mode here' >&2; exit 1; }; done\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c.Binary = bin
	if _, err := c.NewSession(ctxT(t), "keep", "", nil, []string{"sleep", "600"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if ok, err := c.HasSession(ctxT(t), "keep"); !ok || err != nil {
			t.Fatalf("expected keep … got %v, %v", ok, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := c.Stats(); s.Connects != 0 || s.Control != 0 || c.Connected() {
		t.Errorf("expected every call through exec … got %+v", s)
	}
	if ok, _ := (&Client{Socket: c.Socket}).HasSession(ctxT(t), ControlSession); ok {
		t.Error("expected no control session")
	}
}

// TestControlSocketDeleted: a /tmp cleaner deleting the socket does not
// touch a live connection: listings and launches reach the server that
// runs, and no second server starts on the socket path.
func TestControlSocketDeleted(t *testing.T) {
	c := newControlClient(t)
	connected(t, c)
	p, _ := findPane(t, c, "keep")
	sock := socketPath(c)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(p.ServerPID, syscall.SIGUSR1)
		poll(t, "the socket back", func() bool { _, err := os.Stat(sock); return err == nil })
	})
	if _, err := c.NewSession(ctxT(t), "late", "", nil, []string{"sleep", "600"}); err != nil {
		t.Fatalf("new session: %v", err)
	}
	panes, err := c.ListPanes(ctxT(t))
	if err != nil || len(panes) != 3 {
		t.Errorf("expected keep, late and the control session … got %+v, %v", panes, err)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Error("a second server was started on the socket path")
	}
}
