package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herd"
	"herd/internal/api"
	"herd/internal/pgcluster"
	"herd/internal/testenv"
)

// startPG starts a private PostgreSQL cluster for one test and returns the
// DSN of its database; the test is skipped without PostgreSQL (failed on CI).
func startPG(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		testenv.Require(t, "PostgreSQL", err.Error(), testenv.InstallPostgres)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return c.DSN("postgres")
}

// newFleetEnv is a daemon of host name on the shared PostgreSQL at dsn: its
// own state dir and tmux socket. fleet are lines of its [fleet] table;
// host_timeout is 3s unless they set it.
func newFleetEnv(t *testing.T, name, dsn string, fleet ...string) *env {
	lines := strings.Join(fleet, "\n")
	if !strings.Contains(lines, "host_timeout") {
		lines += "\nhost_timeout = \"3s\""
	}
	// application_name tells each daemon's connections apart on the server.
	dsn += " application_name=herd-" + name
	return newEnv(t, fmt.Sprintf("[daemon]\nhost = %q\n[store]\ndriver = \"postgres\"\ndsn = %q\n[fleet]\n%s\n", name, dsn, lines))
}

// connections counts the server's connections of host name's daemon.
func connections(t *testing.T, dsn, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", "herd-"+name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fakeSSH writes a stand-in for `ssh -t HOST herd ARGS...` that records its
// arguments in argsFile and runs herd ARGS as host target would: with
// target's state dir.
func fakeSSH(t *testing.T, target *env) (path, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	path, argsFile = dir+"/ssh", dir+"/args"
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %q\nshift 3\nHERD_STATE_DIR=%q HERD_CONFIG= exec %q \"$@\"\n", argsFile, target.dir, bin)
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path, argsFile
}

func (e *env) hosts() map[string]api.HostView {
	e.t.Helper()
	var views []api.HostView
	if err := json.Unmarshal([]byte(e.must("get", "hosts", "-o", "json")), &views); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]api.HostView{}
	for _, v := range views {
		out[v.Name] = v
	}
	return out
}

// TestFleetOneView: two daemons (hosts a and b) on one PostgreSQL. Each
// sees the whole fleet with its hosts; each runs only its own roles; b's
// daemon killed makes b's sessions unknown on a's view within the host
// timeout (never dead, never relaunched on a), and b restarted adopts them.
func TestFleetOneView(t *testing.T) {
	dsn := startPG(t)
	b := newFleetEnv(t, "b", dsn)
	ssh, sshArgs := fakeSSH(t, b)
	a := newFleetEnv(t, "a", dsn, fmt.Sprintf("ssh = [%q, \"-t\"]", ssh))
	a.start()
	b.start()

	a.must("run", "alpha", "--runtime", "exec", "--", "sleep", "3600")
	b.must("run", "beta", "--runtime", "exec", "--", "sh", "-c", "echo hello-from-b; exec sleep 3600")
	for _, e := range []*env{a, b} {
		e.waitFor("both hosts' sessions running", 20*time.Second, func() bool {
			al, ok1 := e.session("alpha-0")
			be, ok2 := e.session("beta-0")
			return ok1 && ok2 && al.State == herd.StateRunning && be.State == herd.StateRunning && al.Host == "a" && be.Host == "b"
		})
	}
	hs := a.hosts()
	if len(hs) != 2 || hs["a"].Daemon != "up" || hs["b"].Daemon != "up" || hs["a"].Sessions != 1 || hs["b"].Sessions != 1 || !hs["a"].Self || hs["b"].Self {
		t.Fatalf("expected hosts a and b up with one session each (a answering), got %+v", hs)
	}

	// The table shows a HOST column; --host narrows the view.
	table := a.must("get", "sessions")
	if !strings.HasPrefix(table, "NAME") || strings.Fields(strings.SplitN(table, "\n", 2)[0])[1] != "HOST" {
		t.Errorf("expected a HOST column after NAME, got:\n%s", table)
	}
	if got := strings.TrimSpace(a.must("get", "sessions", "--host", "b", "-o", "name")); got != "session/beta-0" {
		t.Errorf("expected --host b to list beta-0 only, got %q", got)
	}
	if got := strings.TrimSpace(b.must("get", "sessions", "-l", "host=a", "-o", "name")); got != "session/alpha-0" {
		t.Errorf("expected -l host=a to list alpha-0 only, got %q", got)
	}
	roles := b.must("get", "roles")
	if !strings.Contains(roles, "HOSTS") || !strings.Contains(roles, "a:1") || !strings.Contains(roles, "b:1") {
		t.Errorf("expected roles with a HOSTS column, got:\n%s", roles)
	}
	if got := b.must("get", "roles", "--host", "a", "-o", "name"); strings.TrimSpace(got) != "role/alpha" {
		t.Errorf("expected --host a to list role alpha only, got %q", got)
	}
	if head := strings.Fields(strings.SplitN(a.must("events"), "\n", 2)[0]); len(head) < 2 || head[1] != "HOST" {
		t.Errorf("expected the events table with a HOST column, got %v", head)
	}
	evs := a.events("--host", "b")
	if len(evs) == 0 || count(evs, herd.EventSpawned) != 1 {
		t.Errorf("expected b's events (one spawned) through a, got %+v", evs)
	}
	for _, ev := range evs {
		if ev.Host != "b" {
			t.Errorf("expected only host b's events, got %+v", ev)
		}
	}
	if out := a.must("describe", "session", "beta-0"); !strings.Contains(out, "b") {
		t.Errorf("expected describe through a to show beta-0, got:\n%s", out)
	}

	// logs of b's session through a run on b, over fleet.ssh.
	a.waitFor("b's output through a", 10*time.Second, func() bool {
		return strings.Contains(a.try("logs", "beta-0", "--tail", "5"), "hello-from-b")
	})
	if got, _ := os.ReadFile(sshArgs); string(got) != "-t\nb\nherd\nlogs\n--tail\n5\nbeta-0\n" {
		t.Errorf("expected ssh -t b herd logs --tail 5 beta-0, got %q", got)
	}

	// A role is reconciled by the host that declared it: scaling b's role
	// through a launches on b.
	if msg := a.must("scale", "beta", "--replicas", "2"); !strings.Contains(msg, "on host b") {
		t.Errorf("expected b's answer to scale, got %q", msg)
	}
	a.waitFor("beta-1 running on b", 20*time.Second, func() bool {
		v, ok := a.session("beta-1")
		return ok && v.State == herd.StateRunning && v.Host == "b"
	})
	// archive through a: b marks it, and the event is b's.
	if msg := a.must("archive", "beta-1"); !strings.Contains(msg, "session beta-1 archived (on host b)") {
		t.Errorf("expected b's answer to archive, got %q", msg)
	}
	if v, _ := a.session("beta-1"); !v.Archived {
		t.Errorf("expected beta-1 archived, got %+v", v)
	}
	if evs := a.events("--session", "beta-1", "--kind", herd.EventActivity); len(evs) == 0 || evs[len(evs)-1].Host != "b" {
		t.Errorf("expected the archive recorded by b, got %+v", evs)
	}
	// b refuses to resume a running session; a relays the refusal.
	if _, errs, code := a.herd("resume", "beta-0"); code == 0 || !strings.Contains(errs, "host b") {
		t.Errorf("expected resume of b's running session through a to fail naming host b, got exit %d: %s", code, errs)
	}
	if _, errs, code := a.herd("apply", "-f", writeRole(t, "beta")); code == 0 || !strings.Contains(errs, "declared on host b") {
		t.Errorf("expected apply of b's role through a to fail naming host b, got exit %d: %s", code, errs)
	}

	// b's daemon dies: its agents live on; a shows them unknown, and b stale.
	agents := b.agentPIDs()
	b.kill(syscall.SIGKILL)
	killed := time.Now()
	a.waitFor("b's sessions unknown on a", 10*time.Second, func() bool {
		for _, v := range a.sessions() {
			if v.Host == "b" && v.State != herd.StateUnknown {
				return false
			}
		}
		return true
	})
	if d := time.Since(killed); d > 3*time.Second+5*time.Second {
		t.Errorf("expected b's sessions unknown within the 3s host timeout and a poll, took %v", d)
	}
	if hs := a.hosts(); hs["b"].Daemon != "stale" || hs["a"].Daemon != "up" {
		t.Errorf("expected b stale and a up, got %+v", hs)
	}
	if v, _ := a.session("alpha-0"); v.State != herd.StateRunning {
		t.Errorf("expected a's own session running, got %s", v.State)
	}
	for _, v := range a.sessions() {
		if v.Role == "beta" && v.Host != "b" {
			t.Errorf("expected no beta session relaunched off b, got %+v", v)
		}
	}
	for _, pid := range agents {
		if syscall.Kill(pid, 0) != nil {
			t.Errorf("expected b's agent %d alive after b's daemon died", pid)
		}
	}

	// b restarted adopts its agents: running again in a's view, no new spawn.
	b.start()
	a.waitFor("b's sessions running again", 20*time.Second, func() bool {
		for _, v := range a.sessions() {
			if v.Host == "b" && v.State != herd.StateRunning {
				return false
			}
		}
		return a.hosts()["b"].Daemon == "up"
	})
	if n := count(a.events("--host", "b", "--kind", herd.EventSpawned), herd.EventSpawned); n != 2 {
		t.Errorf("expected b's two spawns only (adopted after the restart), got %d", n)
	}
}

// writeRole writes a herd.toml declaring role name, for apply.
func writeRole(t *testing.T, name string) string {
	t.Helper()
	path := t.TempDir() + "/roles.toml"
	doc := fmt.Sprintf("[[role]]\nname = %q\ncommand = [\"sleep\", \"3600\"]\nruntime = \"exec\"\n", name)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFleetCommandsCrossHosts: stop, resume and inject issued through host
// a's daemon for sessions of host b are executed by b; 20 CLIs racing one
// stop through both hosts write exactly one stopped event; with b's daemon
// gone, a command for b fails at once naming b.
func TestFleetCommandsCrossHosts(t *testing.T) {
	hasTmux(t)
	dsn := startPG(t)
	// A longer host timeout than TestFleetOneView's: 20 race-built CLIs at
	// once load a small machine enough to delay a heartbeat past 3s.
	a, b := newFleetEnv(t, "a", dsn, `host_timeout = "8s"`), newFleetEnv(t, "b", dsn, `host_timeout = "8s"`)
	a.start()
	b.start()
	out := b.dir + "/typed"
	b.must("run", "beta", "--", "sh", "-c", "stty raw -echo; cat > "+out)
	b.must("run", "gamma", "--runtime", "exec", "--", "sleep", "3600")
	a.waitState("beta-0", herd.StateRunning, 20*time.Second)
	a.waitState("gamma-0", herd.StateRunning, 20*time.Second)

	// inject through a: typed into b's pane by b.
	if msg := a.must("inject", "beta-0", "hello from a"); !strings.Contains(msg, "on host b") {
		t.Errorf("expected the inject answered by host b, got %q", msg)
	}
	a.waitFor("the text typed on b", 10*time.Second, func() bool {
		data, _ := os.ReadFile(out)
		return strings.Contains(string(data), "hello from a")
	})

	// stop through a: executed by b, one stopped event, written by b. b
	// polls for commands every 10s; the store's notification wakes it at once.
	start := time.Now()
	if msg := a.must("stop", "beta-0"); !strings.Contains(msg, "session beta-0 stopped (on host b)") {
		t.Errorf("expected b's answer, got %q", msg)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("expected the stop carried out promptly (a notification wakes b), took %v", took)
	}
	v := a.waitState("beta-0", herd.StateStopped, 10*time.Second)
	if v.Host != "b" {
		t.Errorf("expected beta-0 still on b, got %s", v.Host)
	}
	stops := a.events("--session", "beta-0", "--kind", herd.EventStopped)
	if len(stops) != 1 || stops[0].Host != "b" {
		t.Errorf("expected one stopped event written by b, got %+v", stops)
	}

	// resume through a: b relaunches it.
	if msg := a.must("resume", "beta-0"); !strings.Contains(msg, "on host b") {
		t.Errorf("expected b's answer to resume, got %q", msg)
	}
	a.waitFor("beta-0 running on b again", 20*time.Second, func() bool {
		v, ok := a.session("beta-0")
		return ok && v.State == herd.StateRunning && v.Host == "b"
	})

	// 20 CLIs race one stop through both hosts: one stopped event.
	errs := make(chan string, 20)
	done := make(chan struct{})
	for i := range 20 {
		e := a
		if i%2 == 1 {
			e = b
		}
		go func() {
			o, se, code := e.herd("stop", "gamma-0")
			if code != 0 || !strings.Contains(o, "stopped") {
				errs <- fmt.Sprintf("exit %d: %s%s", code, o, se)
			}
			done <- struct{}{}
		}()
	}
	for range 20 {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Errorf("expected every racing stop to succeed, got %s", e)
	}
	if n := len(a.events("--session", "gamma-0", "--kind", herd.EventStopped)); n != 1 {
		t.Errorf("expected exactly one stopped event for 20 racing stops, got %d", n)
	}
	// After that crowd, each daemon still holds at most 4 connections (its
	// listener among them).
	for _, h := range []string{"a", "b"} {
		if n := connections(t, dsn, h); n < 1 || n > 4 {
			t.Errorf("[%s] expected 1 to 4 connections held, got %d", h, n)
		} else {
			t.Logf("[%s] %d connections held", h, n)
		}
	}

	// b's daemon gone: a refuses at once, naming b; nothing is queued.
	b.kill(syscall.SIGKILL)
	a.waitFor("b stale", 10*time.Second, func() bool { return a.hosts()["b"].Daemon == "stale" })
	start = time.Now()
	_, errs2, code := a.herd("stop", "beta-0")
	if code == 0 || !strings.Contains(errs2, "host b") || time.Since(start) > 5*time.Second {
		t.Errorf("expected a prompt failure naming host b, got exit %d after %v: %s", code, time.Since(start), errs2)
	}
	b.start()
	a.waitFor("b up", 10*time.Second, func() bool { return a.hosts()["b"].Daemon == "up" })
	if v, _ := a.session("beta-0"); v.State != herd.StateRunning {
		t.Errorf("expected beta-0 still running after the refused stop, got %s", v.State)
	}
}

// TestDemoFleet: `herd demo --fleet` runs its story end to end on a private
// PostgreSQL and leaves no process of its own behind.
func TestDemoFleet(t *testing.T) {
	cmd := exec.Command(bin, "demo", "--fleet")
	cmd.Env = append(os.Environ(), "HERD_STATE_DIR="+t.TempDir(), "HERD_CONFIG=", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(string(out), "needs PostgreSQL's initdb") {
		testenv.Require(t, "PostgreSQL", string(out), testenv.InstallPostgres)
	}
	if err != nil {
		t.Fatalf("demo --fleet: %v\n%s", err, out)
	}
	for _, want := range []string{
		"session beta-0 stopped (on host demo-b)", "session beta-0 resumed (on host demo-b)",
		"demo-b   stale", "unknown", "cleaned up",
		"-- placement", "placement leader", "delta-0: demo-b's copy stopped (moved); it runs on demo-a",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("expected %q in the demo's output:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "DATA RACE") {
		t.Errorf("the demo reported a data race:\n%s", out)
	}
	if left := processesMentioning(t, demoRoot(t, string(out))); len(left) > 0 {
		t.Errorf("the demo left processes behind:\n%s", strings.Join(left, "\n"))
	}
}

// TestDemoFleetInterrupted: a ^C while one host's daemon is away still ends
// every agent of the demo, that host's too (only its own daemon stops them).
func TestDemoFleetInterrupted(t *testing.T) {
	cmd := exec.Command(bin, "demo", "--fleet")
	cmd.Env = append(os.Environ(), "HERD_STATE_DIR="+t.TempDir(), "HERD_CONFIG=", "GORACE=atexit_sleep_ms=0")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "demo-b's daemon stops") {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "demo-b's daemon stops") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if strings.Contains(out.String(), "needs PostgreSQL's initdb") {
			testenv.Require(t, "PostgreSQL", out.String(), testenv.InstallPostgres)
		}
		t.Fatalf("the demo never reached its host-away step:\n%s", out.String())
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	if !strings.Contains(out.String(), "cleaned up") {
		t.Errorf("no cleanup after ^C:\n%s", out.String())
	}
	if left := processesMentioning(t, demoRoot(t, out.String())); len(left) > 0 {
		t.Errorf("^C left processes behind:\n%s\n%s", strings.Join(left, "\n"), out.String())
	}
}

// demoRoot is the state directory `herd demo --fleet` announces.
func demoRoot(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`state under (\S+),`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no state directory in the demo's output:\n%s", out)
	}
	return m[1]
}

// processesMentioning lists the live processes whose command line contains s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(b), s) {
			continue
		}
		found = append(found, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(b), "\x00", " ")))
	}
	return found
}
