package startup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/testenv"
)

func TestUnit(t *testing.T) {
	u, err := Unit(Options{Binary: "/opt/herd bin/herd", StateDir: "/home/u/.local/state/herd", Config: "/etc/herd%1.toml", Path: "/home/u/.local/bin:/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Type=notify\n",
		"KillMode=process\n",
		"Restart=on-failure\n",
		"WatchdogSec=30\n",
		`ExecStart="/opt/herd bin/herd" "daemon" "--state-dir" "/home/u/.local/state/herd" "--config" "/etc/herd%%1.toml"` + "\n",
		`Environment="PATH=/home/u/.local/bin:/usr/bin"` + "\n",
		"WantedBy=default.target\n",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("expected the unit to contain %q, got:\n%s", want, u)
		}
	}
}

func TestUnitRejects(t *testing.T) {
	for name, o := range map[string]Options{
		"relative binary": {Binary: "herd", StateDir: "/s"},
		"relative state":  {Binary: "/b/herd", StateDir: "s"},
		"relative config": {Binary: "/b/herd", StateDir: "/s", Config: "herd.toml"},
		"tiny watchdog":   {Binary: "/b/herd", StateDir: "/s", Watchdog: time.Millisecond},
	} {
		if _, err := Unit(o); err == nil {
			t.Errorf("[%s] expected an error", name)
		}
	}
}

func TestInstallRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "systemd", "user")
	path, err := Install(dir, "[Unit]\n")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "[Unit]\n" {
		t.Fatalf("expected the unit written, got %q %v", b, err)
	}
	if _, removed, err := Remove(dir); err != nil || !removed {
		t.Fatalf("expected removed, got %v %v", removed, err)
	}
	if _, removed, err := Remove(dir); err != nil || removed {
		t.Fatalf("expected nothing to remove the second time, got %v %v", removed, err)
	}
}

// TestUnitVerifies runs systemd's own checker on the unit.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Require(t, "systemd-analyze", err.Error(), testenv.InstallSystemdAnalyze)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "herd")
	// ExecStart must name an existing executable for verify to pass.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	u, err := Unit(Options{Binary: bin, StateDir: dir, Path: "/usr/bin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	path, err := Install(dir, u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s\n%s", err, out, u)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("expected no warnings, got:\n%s", s)
	}
}

// TestStateDirOf: the state directory is read back from any unit Unit
// writes, however its paths are quoted, and from hand-written ones.
func TestStateDirOf(t *testing.T) {
	for _, dir := range []string{"/home/a/.local/state/herd", `/srv/my "herd" dir`, "/srv/100%/$HOME/x\\y", "/srv/with space"} {
		unit, err := Unit(Options{Binary: "/usr/bin/herd", StateDir: dir, Config: "/etc/herd.toml"})
		if err != nil {
			t.Fatal(err)
		}
		if got := StateDirOf(unit); got != dir {
			t.Errorf("[%q] expected the state dir read back, got %q", dir, got)
		}
	}
	for _, c := range []struct{ unit, want string }{
		{"[Service]\nExecStart=/usr/bin/herd daemon --state-dir /var/lib/herd\n", "/var/lib/herd"},
		{"[Service]\nExecStart=/usr/bin/herd daemon --state-dir=/var/lib/herd --debug\n", "/var/lib/herd"},
		{"[Service]\nExecStart=/usr/bin/herd daemon\n", ""},
		{"[Service]\nExecStart=/usr/bin/herd daemon --state-dir\n", ""},
		{"no unit at all", ""},
	} {
		if got := StateDirOf(c.unit); got != c.want {
			t.Errorf("[%q] expected %q, got %q", c.unit, c.want, got)
		}
	}
	dir := t.TempDir()
	if ok, err := InstalledFor(dir, "/x"); ok || err != nil {
		t.Errorf("[none] expected not installed, got %v, %v", ok, err)
	}
	unit, _ := Unit(Options{Binary: "/usr/bin/herd", StateDir: "/x/state"})
	if _, err := Install(dir, unit); err != nil {
		t.Fatal(err)
	}
	for state, want := range map[string]bool{"/x/state": true, "/x/state/": true, "/x/other": false} {
		if ok, err := InstalledFor(dir, state); ok != want || err != nil {
			t.Errorf("[%s] expected installed=%v, got %v, %v", state, want, ok, err)
		}
	}
}
