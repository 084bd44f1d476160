package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"herd"
)

// TestLogsFollowFromStart: `herd logs -f` prints the whole output from its
// first line, then follows it; lines that repeat the one before (a ticking
// agent) are new lines too, and nothing is printed twice: what was followed
// is exactly the start of what `herd logs` shows afterwards. Both runtimes.
func TestLogsFollowFromStart(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	e := newEnv(t, fastRestart)
	e.start()
	script := "i=0; while [ $i -lt 60 ]; do i=$((i+1)); echo line-$i; done; while true; do echo tick; sleep 0.2; done"
	e.must("run", "ex", "--runtime", "exec", "--", "sh", "-c", script)
	e.must("run", "tm", "--", "sh", "-c", script)
	for _, name := range []string{"ex-0", "tm-0"} {
		e.waitState(name, herd.StateRunning, 10*time.Second)
		e.waitFor(name+" ticking", 10*time.Second, func() bool { return strings.Contains(e.try("logs", name), "tick") })
		before := strings.Count(e.must("logs", name), "tick")

		var out syncBuffer
		follow := exec.Command(bin, "logs", "-f", name)
		follow.Env = e.environ()
		follow.Stdout = &out
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		e.waitFor(name+" followed past the first read", 20*time.Second, func() bool {
			return strings.Count(out.String(), "tick") >= before+10
		})
		follow.Process.Signal(os.Interrupt)
		follow.Wait()
		followed := out.String()
		final := e.must("logs", name)
		if !strings.HasPrefix(followed, "line-1\nline-2\n") {
			t.Errorf("[%s] expected logs -f to start at the first line, got %q", name, followed[:min(len(followed), 80)])
		}
		if !strings.HasPrefix(final, followed) {
			t.Errorf("[%s] expected the followed output to be the start of the whole output, nothing twice nor left out:\nfollowed %q\nfinal    %q", name, followed, final)
		}
	}
}
