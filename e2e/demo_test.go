package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestDemo runs `herd demo` as the README's quick start does, into a pipe:
// a legend for "!" and the states, a table only when it changed, a real
// activity for every live agent, the stalled agent described with its /proc
// diagnostics, and the state directory removed with the --keep hint. In
// tmux panes when tmux is installed, and as child processes (a machine
// without tmux).
func TestDemo(t *testing.T) {
	for _, runtime := range []string{"tmux", "exec"} {
		t.Run(runtime, func(t *testing.T) {
			t.Parallel() // each demo makes its own daemons, state dirs and tmux server
			if runtime == "tmux" {
				hasTmux(t)
			}
			testDemo(t, "--runtime", runtime)
		})
	}
}

func testDemo(t *testing.T, args ...string) {
	cmd := exec.Command(bin, append([]string{"demo"}, args...)...)
	cmd.Env = demoEnv(t)
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	t.Logf("herd demo:\n%s", out)
	for _, want := range []string{
		`a "!" after the state: a notification or escalation is open`, "ACTIVITY from the agent's hooks: working | waiting",
		"--keep keeps them", "describe session staller-0", "cleaned up",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("expected %q in the demo's output", want)
		}
	}
	if strings.Contains(out, "\033[") {
		t.Errorf("expected no terminal codes in a pipe")
	}
	if strings.Contains(out, "DATA RACE") {
		t.Errorf("the demo reported a data race")
	}

	// Tables: "--- 15:04:05" then the table, up to the next one or a blank line.
	var tables []string
	for _, block := range strings.Split(out, "\n--- ")[1:] {
		_, body, _ := strings.Cut(block, "\n")
		body, _, _ = strings.Cut(body, "\n\n")
		tables = append(tables, body)
	}
	if len(tables) < 3 {
		t.Fatalf("expected several tables as the agents change, got %d", len(tables))
	}
	for i := 1; i < len(tables); i++ {
		if tables[i] == tables[i-1] {
			t.Errorf("table %d printed again unchanged:\n%s", i, tables[i])
		}
	}
	// NAME STATE PROCESS ACTIVITY RESTARTS BACKOFF-UNTIL LAST-EXIT
	final := map[string][]string{}
	for _, line := range strings.Split(tables[len(tables)-1], "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 4 {
			final[f[0]] = f
		}
	}
	for name, want := range map[string]string{"healthy-0": "running", "crashloop-0": "failed!", "staller-0": "stalled", "waiter-0": "running!"} {
		f := final[name]
		if len(f) < 4 {
			t.Errorf("expected %s in the last table, got %q", name, tables[len(tables)-1])
			continue
		}
		if f[1] != want {
			t.Errorf("[%s] expected state %s at the end, got %s", name, want, f[1])
		}
		if f[3] == "unknown" {
			t.Errorf("[%s] expected a real activity, got unknown", name)
		}
	}
	if f := final["waiter-0"]; len(f) > 3 && f[3] != "waiting" {
		t.Errorf("[waiter-0] expected waiting, got %s", f[3])
	}

	// The describe of the stalled agent carries its diagnostics.
	if !regexp.MustCompile(`Diagnostics:\s+state \S+ .*cpu [0-9.]+%, rss [0-9.]+[KMG]`).MatchString(out) {
		t.Errorf("expected the stalled agent's /proc diagnostics")
	}
	if !strings.Contains(out, "stalled ") || !strings.Contains(out, "threshold") {
		t.Errorf("expected the stalled event in the describe")
	}
	m := regexp.MustCompile(`state dir (\S+);`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("expected the state dir named")
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("expected %s removed, got %v", m[1], err)
	}
}
