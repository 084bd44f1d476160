package execrt

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func launch(t *testing.T, r *Runtime, argv ...string) *Proc {
	t.Helper()
	p, err := r.Launch(context.Background(), Spec{
		Session: "s-0", Incarnation: "inc1", Argv: argv, Workdir: t.TempDir(),
		Env: map[string]string{"HERD_SESSION": "s-0", "HERD_INCARNATION": "inc1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExitCodeAndOutput(t *testing.T) {
	r := &Runtime{LogDir: t.TempDir()}
	p := launch(t, r, "sh", "-c", `echo "$HERD_SESSION $HERD_INCARNATION $(pwd)"; echo oops >&2; exit 3`)
	e := p.Wait()
	if e.Code == nil || *e.Code != 3 || e.Signal != nil || e.Reason != "exit_code" {
		t.Fatalf("expected exit code 3, got %+v", e)
	}
	out, errPath := r.Paths("s-0", "inc1")
	b, _ := os.ReadFile(out)
	if !strings.HasPrefix(string(b), "s-0 inc1 /") {
		t.Errorf("expected env and workdir in stdout, got %q", b)
	}
	if b, _ := os.ReadFile(errPath); string(b) != "oops\n" {
		t.Errorf("expected stderr captured, got %q", b)
	}
}

func TestSignalAndOwnSession(t *testing.T) {
	r := &Runtime{LogDir: t.TempDir()}
	p := launch(t, r, "sleep", "30")
	pgid, err := syscall.Getpgid(p.PID)
	if err != nil || pgid != p.PID {
		t.Fatalf("expected the agent to lead its own group, pgid %d err %v", pgid, err)
	}
	if sid, _ := unix.Getsid(p.PID); sid != p.PID {
		t.Errorf("expected its own session, sid %d", sid)
	}
	syscall.Kill(p.PID, syscall.SIGSEGV)
	e := p.Wait()
	if e.Signal == nil || *e.Signal != 11 || e.Code != nil {
		t.Fatalf("expected signal 11, got %+v", e)
	}
}

func TestLaunchErrors(t *testing.T) {
	r := &Runtime{LogDir: t.TempDir()}
	if _, err := r.Launch(context.Background(), Spec{Session: "a", Incarnation: "b"}); err == nil {
		t.Error("expected an error for an empty command")
	}
	_, err := r.Launch(context.Background(), Spec{Session: "a", Incarnation: "b", Argv: []string{"/no/such/agent"}, Workdir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "/no/such/agent") {
		t.Errorf("expected an error naming the command, got %v", err)
	}
}

func TestCapAndTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.stdout")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := 0; i < 100; i++ {
		f.WriteString("line\n")
	}
	if from, err := Cap(path, 100); err != nil || from != 400 {
		t.Fatalf("expected the last 100 bytes kept from offset 400, got %d %v", from, err)
	}
	if info, _ := os.Stat(path); info.Size() != 0 {
		t.Errorf("expected the file truncated, size %d", info.Size())
	}
	f.WriteString("after\n") // the writer keeps appending at the new end
	if info, _ := os.Stat(path); info.Size() != 6 {
		t.Errorf("expected 6 bytes after truncation, got %d", info.Size())
	}
	got, err := ReadTail(path, 2)
	if err != nil || string(got) != "line\nafter\n" {
		t.Errorf("expected the last 2 lines across rotation, got %q %v", got, err)
	}
	all, _ := ReadTail(path, 0)
	if strings.Count(string(all), "\n") != 21 {
		t.Errorf("expected 21 lines in all (the rotated copy keeps the last 100 bytes), got %d", strings.Count(string(all), "\n"))
	}
}

func TestPruneKeepsNewest(t *testing.T) {
	r := &Runtime{LogDir: t.TempDir()}
	dir := filepath.Join(r.LogDir, "s-0")
	os.MkdirAll(dir, 0o700)
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 8; i++ {
		p := filepath.Join(dir, string(rune('a'+i))+".stdout")
		os.WriteFile(p, nil, 0o600)
		os.Chtimes(p, base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute))
	}
	r.prune("s-0", "z")
	entries, _ := os.ReadDir(dir)
	if len(entries) != keepIncarnations-1 {
		t.Fatalf("expected %d files kept besides the current one, got %d", keepIncarnations-1, len(entries))
	}
	if entries[len(entries)-1].Name() != "h.stdout" {
		t.Errorf("expected the newest kept, got %v", entries)
	}
}
