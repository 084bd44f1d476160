package proc

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"herd"
)

func TestDecide(t *testing.T) {
	const boot = "boot-1"
	id := herd.Identity{BootID: boot, PID: 100, StartTime: 500, Marker: "inc-1"}
	live := Stat{PID: 100, State: 'S', StartTime: 500}
	env := map[string]string{herd.EnvIncarnation: "inc-1"}
	noMarker := id
	noMarker.Marker = ""

	const (
		alive    = "alive"
		gone     = "gone"
		mismatch = "mismatch"
	)
	cases := []struct {
		name   string
		id     herd.Identity
		boot   string
		obs    observation
		want   herd.Axis
		reason string
	}{
		{"alive with marker", id, boot, observation{stat: live, env: env}, herd.Alive, alive},
		{"alive without marker", noMarker, boot, observation{stat: live}, herd.Alive, alive},
		{"other boot", id, "boot-2", observation{stat: live, env: env}, herd.Dead, mismatch},
		{"no current boot id", id, "", observation{stat: live, env: env}, herd.Unknown, mismatch},
		{"no recorded boot id", herd.Identity{PID: 100, StartTime: 500}, boot, observation{stat: live}, herd.Unknown, mismatch},
		{"no pid", herd.Identity{BootID: boot}, boot, observation{}, herd.Unknown, mismatch},
		{"pid absent", id, boot, observation{statErr: ErrNoProcess}, herd.Dead, gone},
		{"stat garbled", id, boot, observation{statErr: errGarbled}, herd.Unknown, mismatch},
		{"start time differs", id, boot, observation{stat: Stat{PID: 100, State: 'S', StartTime: 501}, env: env}, herd.Dead, mismatch},
		{"zombie", id, boot, observation{stat: Stat{PID: 100, State: 'Z', StartTime: 500}}, herd.Dead, gone},
		{"dead state", id, boot, observation{stat: Stat{PID: 100, State: 'X', StartTime: 500}}, herd.Dead, gone},
		{"zombie, its last thread", id, boot, observation{stat: Stat{PID: 100, State: 'Z', StartTime: 500, NumThreads: 1}}, herd.Dead, gone},
		{"leader exited, other threads run on (an exec from another thread)", id, boot, observation{stat: Stat{PID: 100, State: 'Z', StartTime: 500, NumThreads: 2}}, herd.Alive, alive},
		{"leader exited, other threads run on, other start time", id, boot, observation{stat: Stat{PID: 100, State: 'Z', StartTime: 501, NumThreads: 2}}, herd.Dead, mismatch},
		{"marker differs", id, boot, observation{stat: live, env: map[string]string{herd.EnvIncarnation: "inc-2"}}, herd.Dead, mismatch},
		{"marker missing", id, boot, observation{stat: live, env: map[string]string{"PATH": "/bin"}}, herd.Unknown, mismatch},
		{"environment empty (mid-exec, or emptied): pid and start time decide", id, boot, observation{stat: live, env: map[string]string{}}, herd.Alive, alive},
		{"marker empty", id, boot, observation{stat: live, env: map[string]string{herd.EnvIncarnation: ""}}, herd.Unknown, mismatch},
		{"environ unreadable", id, boot, observation{stat: live, envErr: errors.New("permission denied")}, herd.Alive, alive},
		{"marker in env but not recorded", noMarker, boot, observation{stat: live, env: map[string]string{herd.EnvIncarnation: "x"}}, herd.Alive, alive},
	}
	for _, c := range cases {
		got, err := decide(c.id, c.boot, c.obs)
		if got != c.want {
			t.Errorf("[%s] expected %s, got %s (%v)", c.name, c.want, got, err)
		}
		var reason string
		switch {
		case err == nil:
			reason = alive
		case errors.Is(err, ErrNoProcess) && !errors.Is(err, ErrIdentityMismatch):
			reason = gone
		case errors.Is(err, ErrIdentityMismatch) && !errors.Is(err, ErrNoProcess):
			reason = mismatch
		default:
			reason = "ambiguous: " + err.Error()
		}
		if reason != c.reason {
			t.Errorf("[%s] expected reason %s, got %s (%v)", c.name, c.reason, reason, err)
		}
	}
}

func TestCheckFixture(t *testing.T) {
	const boot = "boot-1"
	f := newFakeProc(t)
	f.proc(fakeStat{pid: 100, ppid: 1, comm: "claude", start: 500, marker: "inc-1"})
	f.proc(fakeStat{pid: 101, ppid: 1, comm: "z", state: 'Z', start: 600, marker: "inc-1"})
	f.file(102, "stat", "102 (x) S garbage\n")
	f.proc(fakeStat{pid: 103, ppid: 1, comm: "claude", start: 700})
	f.unreadableEnviron(103)
	f.proc(fakeStat{pid: 104, ppid: 1, comm: "herd", state: 'Z', start: 800, threads: 3, marker: "inc-1"})

	id := herd.Identity{BootID: boot, PID: 100, StartTime: 500, Marker: "inc-1"}
	with := func(mod func(*herd.Identity)) herd.Identity {
		c := id
		mod(&c)
		return c
	}
	cases := []struct {
		name string
		fs   FS
		id   herd.Identity
		boot string
		want herd.Axis
	}{
		{"alive", f.fs(), id, boot, herd.Alive},
		{"same pid, other start time", f.fs(), with(func(i *herd.Identity) { i.StartTime = 499 }), boot, herd.Dead},
		{"other boot id", f.fs(), id, "boot-2", herd.Dead},
		{"marker mismatch", f.fs(), with(func(i *herd.Identity) { i.Marker = "inc-0" }), boot, herd.Dead},
		{"no marker recorded", f.fs(), with(func(i *herd.Identity) { i.Marker = "" }), boot, herd.Alive},
		{"pid absent", f.fs(), with(func(i *herd.Identity) { i.PID = 999 }), boot, herd.Dead},
		{"zombie", f.fs(), herd.Identity{BootID: boot, PID: 101, StartTime: 600, Marker: "inc-1"}, boot, herd.Dead},
		{"leader exited mid-exec", f.fs(), herd.Identity{BootID: boot, PID: 104, StartTime: 800, Marker: "inc-1"}, boot, herd.Alive},
		{"garbled stat", f.fs(), herd.Identity{BootID: boot, PID: 102, StartTime: 1}, boot, herd.Unknown},
		{"environ unreadable", f.fs(), herd.Identity{BootID: boot, PID: 103, StartTime: 700, Marker: "inc-1"}, boot, herd.Alive},
		{"nonexistent root", FS{Root: filepath.Join(f.root, "missing")}, id, boot, herd.Unknown},
	}
	for _, c := range cases {
		if got := c.fs.Check(c.id, c.boot); got != c.want {
			t.Errorf("[%s] expected %s, got %s", c.name, c.want, got)
		}
	}
}

func TestIdentifyFixture(t *testing.T) {
	f := newFakeProc(t)
	f.proc(fakeStat{pid: 100, ppid: 1, comm: "claude", start: 500, marker: "inc-1"})
	f.proc(fakeStat{pid: 101, ppid: 1, comm: "z", state: 'Z', start: 600})
	f.proc(fakeStat{pid: 103, ppid: 1, comm: "claude", start: 700})
	f.unreadableEnviron(103)

	got, err := f.fs().Identify(100, "b")
	want := herd.Identity{BootID: "b", PID: 100, StartTime: 500, Marker: "inc-1"}
	if err != nil || got != want {
		t.Errorf("[with marker] expected %+v, got %+v, %v", want, got, err)
	}
	got, err = f.fs().Identify(103, "b")
	want = herd.Identity{BootID: "b", PID: 103, StartTime: 700}
	if err != nil || got != want {
		t.Errorf("[environ unreadable] expected %+v, got %+v, %v", want, got, err)
	}
	if _, err := f.fs().Identify(101, "b"); !isNoProcess(err) {
		t.Errorf("[zombie] expected ErrNoProcess, got %v", err)
	}
	f.proc(fakeStat{pid: 104, ppid: 1, comm: "herd", state: 'Z', start: 800, threads: 2})
	got, err = f.fs().Identify(104, "b")
	want = herd.Identity{BootID: "b", PID: 104, StartTime: 800}
	if err != nil || got != want {
		t.Errorf("[leader exited, threads run on] expected %+v, got %+v, %v", want, got, err)
	}
	if _, err := f.fs().Identify(999, "b"); !isNoProcess(err) {
		t.Errorf("[absent] expected ErrNoProcess, got %v", err)
	}
}

func TestIdentifyCheckReal(t *testing.T) {
	boot, err := BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	fs := Real()
	cmd, reaped := startCmd(t, "inc-real", false, "sleep", "30")
	pid := cmd.Process.Pid

	id, err := fs.Identify(pid, boot)
	if err != nil {
		t.Fatalf("identify: %v", err)
	}
	if id.PID != pid || id.BootID != boot || id.Marker != "inc-real" || id.StartTime == 0 {
		t.Fatalf("expected identity of pid %d with marker inc-real, got %+v", pid, id)
	}
	if got := fs.Check(id, boot); got != herd.Alive {
		t.Fatalf("[running] expected alive, got %s", got)
	}
	other := id
	other.StartTime++
	if got := fs.Check(other, boot); got != herd.Dead {
		t.Errorf("[other start time] expected dead, got %s", got)
	}
	other = id
	other.Marker = "inc-other"
	if got := fs.Check(other, boot); got != herd.Dead {
		t.Errorf("[other marker] expected dead, got %s", got)
	}
	if got := fs.Check(id, "another-boot"); got != herd.Dead {
		t.Errorf("[other boot] expected dead, got %s", got)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-reaped
	if got := fs.Check(id, boot); got != herd.Dead {
		t.Errorf("[killed and reaped] expected dead, got %s", got)
	}
}

func TestCheckRealZombie(t *testing.T) {
	boot, err := BootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	fs := Real()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	id, err := fs.Identify(cmd.Process.Pid, boot)
	if err != nil {
		t.Fatalf("identify: %v", err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped: the process stays a zombie until Wait.
	waitFor(t, "zombie", func() bool {
		st, err := fs.Stat(id.PID)
		return err == nil && st.State == 'Z'
	})
	if got := fs.Check(id, boot); got != herd.Dead {
		t.Errorf("[zombie] expected dead, got %s", got)
	}
	if err := Signal(fs, id, boot, unix.SIGTERM); !isNoProcess(err) {
		t.Errorf("[zombie] expected Signal to report ErrNoProcess, got %v", err)
	}
	// Its pidfd is readable: the exit is proven, and WaitExit says so at once.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := WaitExit(ctx, fs, id, boot); err != nil {
		t.Errorf("[zombie] expected WaitExit to return nil, got %v", err)
	}
}
