package sdnotify

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// listen opens a real unixgram socket, as systemd does for NOTIFY_SOCKET.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 256)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("expected a datagram, got %v", err)
	}
	return string(buf[:n])
}

func TestNotifyPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn := listen(t, path)
	t.Setenv("NOTIFY_SOCKET", path)
	n := FromEnv()
	if !n.Enabled() {
		t.Fatal("expected a notifier enabled by NOTIFY_SOCKET")
	}
	for _, msg := range []string{Ready, Watchdog, Stopping} {
		if err := n.Notify(msg); err != nil {
			t.Fatalf("[%s] expected no error, got %v", msg, err)
		}
		if got := receive(t, conn); got != msg {
			t.Errorf("expected %q, got %q", msg, got)
		}
	}
}

func TestNotifyAbstract(t *testing.T) {
	name := "herd-sdnotify-test-" + filepath.Base(t.TempDir())
	conn := listen(t, "\x00"+name)
	if err := New("@" + name).Notify(Ready); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, conn); got != Ready {
		t.Errorf("expected %q, got %q", Ready, got)
	}
}

func TestNoSocketIsNoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := FromEnv()
	if n.Enabled() {
		t.Error("expected a disabled notifier without NOTIFY_SOCKET")
	}
	if err := n.Notify(Ready); err != nil {
		t.Errorf("expected a no-op, got %v", err)
	}
	var zero *Notifier
	if err := zero.Notify(Ready); err != nil {
		t.Errorf("expected a nil notifier to be a no-op, got %v", err)
	}
}

func TestNotifyGoneSocket(t *testing.T) {
	err := New(filepath.Join(t.TempDir(), "absent")).Notify(Ready)
	if err == nil {
		t.Error("expected an error when nothing listens")
	}
}

func TestWatchdogInterval(t *testing.T) {
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
		ok        bool
	}{
		{"", "", 0, false},
		{"30000000", "", 15 * time.Second, true},
		{"30000000", "42", 15 * time.Second, true},
		{"30000000", "43", 0, false},
		{"30000000", "x", 0, false},
		{"0", "", 0, false},
		{"-5", "", 0, false},
		{"abc", "", 0, false},
	} {
		got, ok := watchdogInterval(tc.usec, tc.pid, 42)
		if got != tc.want || ok != tc.ok {
			t.Errorf("[usec %q pid %q] expected %v %v, got %v %v", tc.usec, tc.pid, tc.want, tc.ok, got, ok)
		}
	}
}
