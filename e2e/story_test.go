package e2e

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
	"time"

	"herd"
)

// TestEveryIncarnationStartsInTheLog: the daemon SIGKILLed at random
// points during launches and scale churn, a few rounds; then every
// incarnation's story in `herd events` has a beginning: its first event
// is its start (spawned, restarted, resumed or adopted), or it ends as a
// launch that never started (launch_failed, never_started).
func TestEveryIncarnationStartsInTheLog(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 4))
	e := newEnv(t, fastRestart)
	e.start()
	e.must("run", "story", "--replicas", "4", "--", "sleep", "300")
	e.must("run", "story-x", "--runtime", "exec", "--replicas", "2", "--", "sleep", "300")
	for round := range 10 {
		role := []string{"story", "story-x"}[rng.IntN(2)]
		n := 1 + rng.IntN(6)
		done := make(chan struct{})
		go func() { e.herd("scale", role, "--replicas", fmt.Sprint(n)); close(done) }()
		time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		e.kill(syscall.SIGKILL)
		<-done
		e.start()
		// At once, before the new daemon resolves the launches the last
		// one left unfinished: some of them are stopped unresolved.
		m := rng.IntN(3)
		e.herd("scale", role, "--replicas", fmt.Sprint(m))
		t.Logf("round %d: %s scaled to %d, killed, then to %d", round, role, n, m)
	}
	e.must("scale", "story", "--replicas", "2")
	e.must("scale", "story-x", "--replicas", "1")
	e.waitFor("the churn settled", 40*time.Second, func() bool {
		running := map[string]int{}
		for _, v := range e.sessions() {
			switch v.State {
			case herd.StateRunning:
				running[v.Role]++
			case herd.StateStopped:
			default:
				return false // pending, backoff...: not settled yet
			}
		}
		return running["story"] == 2 && running["story-x"] == 1
	})

	byInc := map[string][]herd.Event{}
	var order []string
	for _, ev := range e.events("--limit", "0") {
		if ev.Incarnation == "" {
			continue
		}
		if _, ok := byInc[ev.Incarnation]; !ok {
			order = append(order, ev.Incarnation)
		}
		byInc[ev.Incarnation] = append(byInc[ev.Incarnation], ev)
	}
	starts := []string{herd.EventSpawned, herd.EventRestarted, herd.EventResumed, herd.EventAdopted}
	neverStarted := 0
	for _, inc := range order {
		evs := byInc[inc]
		if slices.Contains(starts, evs[0].Kind) {
			continue
		}
		if slices.ContainsFunc(evs, func(ev herd.Event) bool {
			return (ev.Kind == herd.EventSummary || ev.Kind == herd.EventExited) &&
				(ev.Reason == herd.ReasonNeverStarted || ev.Reason == herd.ReasonLaunchFailed)
		}) {
			neverStarted++
			continue
		}
		var story []string
		for _, ev := range evs {
			story = append(story, ev.Kind+"/"+ev.Reason)
		}
		t.Errorf("[%s of %s] expected its first event to be its start, or its end a launch that never started … got %v", inc, evs[0].Session, story)
	}
	t.Logf("%d incarnations, %d of them launches that never started", len(order), neverStarted)
	for _, v := range e.sessions() {
		if v.State == herd.StateRunning && len(byInc[v.Incarnation]) == 0 {
			t.Errorf("[%s] expected its running incarnation %s in the log … got no event", v.Name, v.Incarnation)
		}
	}
}
