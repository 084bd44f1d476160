// Package testenv lets herd's tests say which capability of the machine
// they need: a missing one is a named skip, recorded for scripts/test.sh's
// coverage line, or, under CI, a failure that says what to install. It is
// imported by tests only.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvSkips names the file each skip for a missing capability is appended
// to, one line each: capability, test, why (tab-separated).
// scripts/test.sh sets it and prints the lines at the end.
const EnvSkips = "HERD_TEST_SKIPS"

// Install hints, for the capabilities scripts/test.sh and the README
// promise.
const (
	InstallCgroup         = "a writable cgroup v2 with cgroup.kill (Linux 5.14+): run the tests as root on a host with cgroup2 mounted, or under `systemd-run --user --scope -p Delegate=yes`"
	InstallTmux           = "tmux (apt-get install tmux; scripts/test.sh installs it)"
	InstallSystemdAnalyze = "systemd-analyze (apt-get install systemd)"
	InstallPostgres       = "PostgreSQL's initdb and postgres (apt-get install postgresql; scripts/test.sh installs it), or HERD_TEST_PG_DSN"
)

// CI reports whether the tests run under CI (CI set, as CI services do).
func CI() bool { return os.Getenv("CI") != "" }

// Require is called by a test that needs capability and found it missing
// (why): under CI it fails the test with what to install, elsewhere it
// skips it, by name, and records the skip.
func Require(t testing.TB, capability, why, install string) {
	t.Helper()
	if CI() {
		t.Fatalf("needs %s, missing on CI: %s; install %s", capability, why, install)
	}
	Skip(t, capability, why)
}

// Lacks is Require for a test that goes on without capability, testing
// less (a fallback path only): under CI it fails the test, elsewhere it
// logs and records what was not tested.
func Lacks(t testing.TB, capability, why, install string) {
	t.Helper()
	if CI() {
		t.Fatalf("needs %s, missing on CI: %s; install %s", capability, why, install)
	}
	record(name(t), capability, why)
	t.Logf("not tested here, needs %s: %s", capability, why)
}

// Skip skips a test that needs capability, missing here (why), even under
// CI (a capability the README does not promise), and records the skip.
func Skip(t testing.TB, capability, why string) {
	t.Helper()
	record(name(t), capability, why)
	t.Skipf("needs %s: %s", capability, why)
}

// record appends one skip to the file EnvSkips names, if any.
func record(test, capability, why string) {
	path := os.Getenv(EnvSkips)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	clean := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	fmt.Fprintf(f, "%s\t%s\t%s\n", clean(capability), test, clean(why))
}

// name is the test's name with its package's.
func name(t testing.TB) string {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test") + "." + t.Name()
}
