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
