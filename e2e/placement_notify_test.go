package e2e

import (
	"fmt"
	"testing"
	"time"

	"herd"
)

// TestPlacementReachesEveryDaemonAtOnce: two daemons whose rounds (probe,
// reconcile, placement) run every 5s. A placed role declared on b, the
// follower, for host b: the role's write wakes the leader a (a
// notification), which places the slots on b, whose put wakes b's
// reconciler (another): each slot runs on b well within one round, three
// times over (a scale-up each).
func TestPlacementReachesEveryDaemonAtOnce(t *testing.T) {
	dsn := startPG(t)
	const round = 5 * time.Second
	probe := fmt.Sprintf("[probe]\ninterval = %q\ntimeout = \"1s\"\n", round.String())
	a := newFleetEnvWith(t, "a", dsn, probe)
	a.start()
	a.waitFor("a leading placement", 3*round, func() bool { return leader(a) == "a" })
	b := newFleetEnvWith(t, "b", dsn, probe)
	b.start()
	var took []time.Duration
	for n := 1; n <= 3; n++ {
		start := time.Now()
		if n == 1 {
			b.must("run", "nb", "--hosts", "b", "--runtime", "exec", "--", "sleep", "3600")
		} else {
			b.must("scale", "nb", "--replicas", fmt.Sprint(n))
		}
		name := herd.SessionName("nb", n-1)
		b.waitFor(name+" running on b", 2*round, func() bool { return hostsOf(b, "nb", herd.StateRunning)[name] == "b" })
		took = append(took, time.Since(start))
	}
	t.Logf("role written on b -> placed by a -> running on b: %v (rounds every %v)", took, round)
	for i, d := range took {
		if d > round/2 {
			t.Errorf("[slot %d] expected it running well within one round (%v), took %v", i, round, d)
		}
	}
}

// newFleetEnvWith is newFleetEnv with more of the config (a [probe]
// table) besides the [fleet] lines.
func newFleetEnvWith(t *testing.T, name, dsn, extra string, fleet ...string) *env {
	lines := "host_timeout = \"15s\"\n"
	for _, l := range fleet {
		lines += l + "\n"
	}
	dsn += " application_name=herd-" + name
	return newEnv(t, fmt.Sprintf("[daemon]\nhost = %q\n[store]\ndriver = \"postgres\"\ndsn = %q\n%s[fleet]\n%s", name, dsn, extra, lines))
}
