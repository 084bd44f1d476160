package taskflow

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/errs"
)

func replica(st herd.State, act herd.Activity, inc, conv string, ended bool) *Replica {
	return &Replica{Name: "w-0", State: st, Activity: act, Incarnation: inc, Conversation: conv, TurnEnded: ended, Since: time.Unix(0, 0)}
}

func TestNext(t *testing.T) {
	const run, idle, working, waiting, blocked = herd.StateRunning, herd.ActivityIdle, herd.ActivityWorking, herd.ActivityWaiting, herd.ActivityBlocked
	task := func(st herd.TaskState, inc, conv string) herd.Task {
		return herd.Task{ID: "t-1", State: st, Session: "w-0", Incarnation: inc, Conversation: conv}
	}
	for _, c := range []struct {
		name string
		task herd.Task
		obs  Observed
		want Step
	}{
		{"queued is Assign's", task(herd.TaskQueued, "", ""), Observed{Replica: replica(run, idle, "i1", "", false)}, Step{Do: Wait}},
		{"ended", task(herd.TaskLanded, "i1", ""), Observed{}, Step{Do: Wait}},
		{"checking is the check's", task(herd.TaskChecking, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true), Commits: 1}, Step{Do: Wait}},
		{"review is a person's", task(herd.TaskReview, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true), Commits: 1}, Step{Do: Wait}},
		{"replica gone", task(herd.TaskWorking, "i1", "c1"), Observed{}, Step{Do: NeedsYou, Reason: ReasonReplicaGone}},
		{"replica gone, a person told already", task(herd.TaskNeedsYou, "i1", "c1"), Observed{}, Step{Do: Wait}},

		{"assigned: relaunch into the worktree", task(herd.TaskAssigned, "", ""), Observed{Replica: replica(run, idle, "i0", "", false)}, Step{Do: Relaunch}},
		{"assigned: the replica busy, wait", task(herd.TaskAssigned, "", ""), Observed{Replica: replica(run, working, "i0", "", false)}, Step{Do: Wait}},
		{"assigned: relaunched, not ready", task(herd.TaskAssigned, "i1", ""), Observed{Replica: replica(herd.StatePending, herd.ActivityUnknown, "i1", "", false)}, Step{Do: Wait}},
		{"assigned: relaunched and ready", task(herd.TaskAssigned, "i1", ""), Observed{Replica: replica(run, idle, "i1", "c1", false)}, Step{Do: Deliver}},
		{"assigned: crashed before delivery, relaunched", task(herd.TaskAssigned, "i1", ""), Observed{Replica: replica(run, idle, "i2", "c2", false)}, Step{Do: Deliver}},

		{"working", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, working, "i1", "c1", false)}, Step{Do: Wait}},
		{"turn ended with commits", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true), Commits: 2}, Step{Do: Check}},
		{"turn ended without a commit", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true)}, Step{Do: NeedsYou, Reason: ReasonNoCommit}},
		{"turn ended, branch gone", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true), Commits: -1}, Step{Do: Fail, Reason: ReasonBranchGone}},
		{"idle but no turn ended since the delivery", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", false), Commits: 3}, Step{Do: Wait}},
		{"waits on a dialog", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, waiting, "i1", "c1", false)}, Step{Do: NeedsYou, Reason: ReasonWaiting}},
		{"blocked", task(herd.TaskChanges, "i1", "c1"), Observed{Replica: replica(run, blocked, "i1", "c1", false)}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"stalled", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(herd.StateStalled, working, "i1", "c1", false)}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"failed replica", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(herd.StateFailed, idle, "i1", "c1", false)}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"stopped replica", task(herd.TaskChanges, "i1", "c1"), Observed{Replica: replica(herd.StateStopped, idle, "i1", "c1", false), Now: time.Unix(0, 0).Add(StoppedGrace)}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"stopped for a moment (a restart)", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(herd.StateStopped, idle, "i1", "c1", false), Now: time.Unix(0, 0).Add(StoppedGrace - time.Second)}, Step{Do: Wait}},
		{"needs you, still stalled", task(herd.TaskNeedsYou, "i1", "c1"), Observed{Replica: replica(herd.StateStalled, working, "i1", "c1", false)}, Step{Do: Wait}},
		{"needs you, still waiting", task(herd.TaskNeedsYou, "i1", "c1"), Observed{Replica: replica(run, waiting, "i1", "c1", false)}, Step{Do: Wait}},
		{"needs you, works again", task(herd.TaskNeedsYou, "i1", "c1"), Observed{Replica: replica(run, working, "i1", "c1", false)}, Step{Do: Resume}},
		{"needs you, turn ended with commits", task(herd.TaskNeedsYou, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true), Commits: 1}, Step{Do: Check}},
		{"needs you, turn ended again without", task(herd.TaskNeedsYou, "i1", "c1"), Observed{Replica: replica(run, idle, "i1", "c1", true)}, Step{Do: Wait}},

		{"crash relaunch, not ready", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(herd.StateBackoff, herd.ActivityUnknown, "i1", "c1", false)}, Step{Do: Wait}},
		{"crash relaunch resumed the conversation", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, idle, "i2", "c1", false)}, Step{Do: Adopt}},
		{"crash relaunch, a new conversation", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, idle, "i2", "c2", false)}, Step{Do: Deliver}},
		{"crash relaunch, no conversation known", task(herd.TaskChanges, "i1", ""), Observed{Replica: replica(run, idle, "i2", "", false)}, Step{Do: Deliver}},
		{"crash relaunch, busy", task(herd.TaskWorking, "i1", "c1"), Observed{Replica: replica(run, working, "i2", "c1", false)}, Step{Do: Wait}},

		{"nudged, still stalled: Escalate decides", nudged(task(herd.TaskWorking, "i1", "c1")), Observed{Replica: replica(herd.StateStalled, working, "i1", "c1", false)}, Step{Do: Wait}},
		{"nudged, failed since", nudged(task(herd.TaskWorking, "i1", "c1")), Observed{Replica: replica(herd.StateFailed, idle, "i1", "c1", false)}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"escalated, the agent works on: stays before a person", escalated(task(herd.TaskNeedsYou, "i1", "c1")), Observed{Replica: replica(run, working, "i1", "c1", false)}, Step{Do: Wait}},
		{"escalated, turn ended with commits", escalated(task(herd.TaskNeedsYou, "i1", "c1")), Observed{Replica: replica(run, idle, "i1", "c1", true), Commits: 1}, Step{Do: Check}},
	} {
		if got := Next(c.task, c.obs); got != c.want {
			t.Errorf("[%s] expected %v %q, got %v %q", c.name, c.want.Do, c.want.Reason, got.Do, got.Reason)
		}
	}
}

// TestNextExec: a task held by an exec replica — the prompt given as
// the launch's argument, the turn ended when the agent exits 0.
func TestNextExec(t *testing.T) {
	t0 := time.Unix(0, 0)
	exec := func(st herd.State, act herd.Activity, inc string) *Replica {
		return &Replica{Name: "w-0", State: st, Activity: act, Incarnation: inc, Since: t0, Exec: true}
	}
	task := func(st herd.TaskState, inc string) herd.Task {
		return herd.Task{ID: "t-1", State: st, Session: "w-0", Incarnation: inc}
	}
	const idle, working = herd.ActivityIdle, herd.ActivityWorking
	for _, c := range []struct {
		name string
		task herd.Task
		obs  Observed
		want Step
	}{
		{"assigned, parked: launch it with the prompt", task(herd.TaskAssigned, ""), Observed{Replica: exec(herd.StateSucceeded, herd.ActivityUnknown, "i0")}, Step{Do: Relaunch}},
		{"assigned, the replica still runs its last turn", task(herd.TaskAssigned, ""), Observed{Replica: exec(herd.StateRunning, working, "i0")}, Step{Do: Wait}},
		{"working", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateRunning, working, "i1")}, Step{Do: Wait}},
		{"working, idle between hooks: not an end", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateRunning, idle, "i1"), Commits: 2}, Step{Do: Wait}},
		{"exited 0 with commits", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateSucceeded, idle, "i1"), Commits: 2}, Step{Do: Check}},
		{"exited 0 without a commit", task(herd.TaskChanges, "i1"), Observed{Replica: exec(herd.StateSucceeded, idle, "i1")}, Step{Do: NeedsYou, Reason: ReasonNoCommit}},
		{"exited 0, branch gone", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateSucceeded, idle, "i1"), Commits: -1}, Step{Do: Fail, Reason: ReasonBranchGone}},
		{"needs you, still exited", task(herd.TaskNeedsYou, "i1"), Observed{Replica: exec(herd.StateSucceeded, idle, "i1")}, Step{Do: Wait}},
		{"needs you after the check, exited 0 with commits: not checked again", task(herd.TaskNeedsYou, "i1"), Observed{Replica: exec(herd.StateSucceeded, idle, "i1"), Commits: 2}, Step{Do: Wait}},
		{"needs you, relaunched by hand", task(herd.TaskNeedsYou, "i1"), Observed{Replica: exec(herd.StateRunning, working, "i2")}, Step{Do: Wait}},
		{"crashed, backing off", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateBackoff, herd.ActivityUnknown, "i1")}, Step{Do: Wait}},
		{"relaunched after a crash: its launch had the text", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StatePending, herd.ActivityUnknown, "i2")}, Step{Do: Adopt}},
		{"failed: its restarts spent", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateFailed, herd.ActivityUnknown, "i1")}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"stalled", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateStalled, working, "i1")}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"stopped for a moment", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateStopped, herd.ActivityUnknown, "i1"), Now: t0.Add(time.Second)}, Step{Do: Wait}},
		{"stopped", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateStopped, herd.ActivityUnknown, "i1"), Now: t0.Add(StoppedGrace)}, Step{Do: NeedsYou, Reason: ReasonAgentStuck}},
		{"waits on a dialog", task(herd.TaskWorking, "i1"), Observed{Replica: exec(herd.StateRunning, herd.ActivityWaiting, "i1")}, Step{Do: NeedsYou, Reason: ReasonWaiting}},
		{"needs you, failed", task(herd.TaskNeedsYou, "i1"), Observed{Replica: exec(herd.StateFailed, herd.ActivityUnknown, "i1")}, Step{Do: Wait}},
	} {
		if got := Next(c.task, c.obs); got != c.want {
			t.Errorf("[%s] expected %v %q, got %v %q", c.name, c.want.Do, c.want.Reason, got.Do, got.Reason)
		}
	}
	// Assign takes a parked exec replica, not one running a turn.
	queued := []herd.Task{{ID: "t-1", Role: "w", State: herd.TaskQueued}, {ID: "t-2", Role: "w", State: herd.TaskQueued}}
	got := Assign(queued, []Candidate{
		{Replica: *exec(herd.StateRunning, working, "i0"), Role: "w"},
		{Replica: Replica{Name: "w-1", State: herd.StateSucceeded, Exec: true}, Role: "w"},
	})
	if want := []Pair{{Task: "t-1", Session: "w-1"}}; !cmp.Equal(got, want) {
		t.Errorf("[assign] expected %v, got %v", want, got)
	}
}

func nudged(t herd.Task) herd.Task {
	at := time.Unix(0, 0)
	t.Reacted, t.ReactedAt, t.Nudges = herd.ReactionAgentStuck, &at, 1
	return t
}

func escalated(t herd.Task) herd.Task {
	t.Reason = ReasonEscalated
	return t
}

func TestStuck(t *testing.T) {
	stalled, failed, blocked := replica(herd.StateStalled, herd.ActivityWorking, "i1", "c1", false), replica(herd.StateFailed, herd.ActivityIdle, "i1", "c1", false), replica(herd.StateRunning, herd.ActivityBlocked, "i1", "c1", false)
	task := func(st herd.TaskState, nudges int) herd.Task {
		return herd.Task{ID: "t-1", State: st, Session: "w-0", Incarnation: "i1", Nudges: nudges}
	}
	person, nudge := Step{Do: NeedsYou, Reason: ReasonAgentStuck}, Step{Do: Nudge}
	for _, c := range []struct {
		name    string
		task    herd.Task
		r       *Replica
		send    bool
		retries int
		want    Step
	}{
		{"notify: a person at once", task(herd.TaskWorking, 0), stalled, false, 3, person},
		{"send: a stalled agent is nudged", task(herd.TaskWorking, 0), stalled, true, 1, nudge},
		{"send, in changes", task(herd.TaskChanges, 2), stalled, true, 3, nudge},
		{"send, the nudges spent", task(herd.TaskWorking, 1), stalled, true, 1, person},
		{"send, no retries", task(herd.TaskWorking, 0), stalled, true, 0, person},
		{"send, a failed agent cannot read", task(herd.TaskWorking, 0), failed, true, 3, person},
		{"send, a rate-limited agent waits for its reset", task(herd.TaskWorking, 0), blocked, true, 3, person},
		{"send, the replica gone", task(herd.TaskWorking, 0), nil, true, 3, person},
		{"send, before the prompt went", task(herd.TaskAssigned, 0), stalled, true, 3, person},
		{"send, an exec agent reads no input", task(herd.TaskWorking, 0), &Replica{Name: "w-0", State: herd.StateStalled, Exec: true}, true, 3, person},
	} {
		if got := Stuck(c.task, c.r, c.send, c.retries); got != c.want {
			t.Errorf("[%s] expected %v %q, got %v %q", c.name, c.want.Do, c.want.Reason, got.Do, got.Reason)
		}
	}
}

func TestEscalate(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	stalled, working := replica(herd.StateStalled, herd.ActivityWorking, "i1", "c1", false), replica(herd.StateRunning, herd.ActivityWorking, "i1", "c1", false)
	task := func(st herd.TaskState, kind string, nudges int) herd.Task {
		return herd.Task{ID: "t-1", State: st, Session: "w-0", Incarnation: "i1", Reacted: kind, ReactedAt: &t0, Nudges: nudges}
	}
	const after = 30 * time.Minute
	for _, c := range []struct {
		name    string
		task    herd.Task
		r       *Replica
		after   time.Duration
		retries int
		now     time.Time
		want    Step
		at      time.Time
	}{
		{"nothing sent", task(herd.TaskWorking, "", 0), working, after, 0, t0.Add(time.Hour), Step{Do: Wait}, time.Time{}},
		{"check failure sent, not yet", task(herd.TaskWorking, herd.ReactionCheckFailed, 0), working, after, 2, t0.Add(after - time.Second), Step{Do: Wait}, t0.Add(after)},
		{"check failure sent, unanswered", task(herd.TaskWorking, herd.ReactionCheckFailed, 0), working, after, 2, t0.Add(after), Step{Do: NeedsYou, Reason: ReasonEscalated}, t0.Add(after)},
		{"comments sent, unanswered", task(herd.TaskChanges, herd.ReactionChangesRequested, 0), working, after, 0, t0.Add(2 * after), Step{Do: NeedsYou, Reason: ReasonEscalated}, t0.Add(after)},
		{"conflict sent, never escalated", task(herd.TaskWorking, herd.ReactionConflict, 0), working, 0, 0, t0.Add(100 * time.Hour), Step{Do: Wait}, time.Time{}},
		{"answered: checking", task(herd.TaskChecking, herd.ReactionCheckFailed, 0), working, after, 2, t0.Add(after), Step{Do: Wait}, time.Time{}},
		{"nudged, works again", task(herd.TaskWorking, herd.ReactionAgentStuck, 1), working, after, 2, t0.Add(time.Second), Step{Do: Clear}, t0.Add(after)},
		{"nudged, replica gone", task(herd.TaskWorking, herd.ReactionAgentStuck, 1), nil, after, 2, t0.Add(time.Second), Step{Do: Clear}, t0.Add(after)},
		{"nudged, still stalled, not yet", task(herd.TaskWorking, herd.ReactionAgentStuck, 1), stalled, after, 2, t0.Add(after - time.Second), Step{Do: Wait}, t0.Add(after)},
		{"nudged, still stalled: again", task(herd.TaskWorking, herd.ReactionAgentStuck, 1), stalled, after, 2, t0.Add(after), Step{Do: Nudge}, t0.Add(after)},
		{"nudged, still stalled, nudges spent", task(herd.TaskWorking, herd.ReactionAgentStuck, 2), stalled, after, 2, t0.Add(after), Step{Do: NeedsYou, Reason: ReasonAgentStuck}, t0.Add(after)},
	} {
		if got := Escalate(c.task, c.r, c.after, c.retries, c.now); got != c.want {
			t.Errorf("[%s] expected %v %q, got %v %q", c.name, c.want.Do, c.want.Reason, got.Do, got.Reason)
		}
		if got := EscalateAt(c.task, c.after); !got.Equal(c.at) {
			t.Errorf("[%s] expected escalation at %v, got %v", c.name, c.at, got)
		}
	}
}

func TestAllowed(t *testing.T) {
	allowed := map[string][]herd.TaskState{
		VerbCancel:  {herd.TaskQueued, herd.TaskAssigned, herd.TaskWorking, herd.TaskNeedsYou, herd.TaskChecking, herd.TaskReview, herd.TaskChanges},
		VerbRetry:   {herd.TaskNeedsYou, herd.TaskFailed, herd.TaskCancelled},
		VerbApprove: {herd.TaskReview},
		VerbComment: {herd.TaskWorking, herd.TaskNeedsYou, herd.TaskReview, herd.TaskChanges},
		VerbDone:    {herd.TaskWorking, herd.TaskNeedsYou, herd.TaskChanges},
		VerbBlocked: {herd.TaskWorking, herd.TaskNeedsYou, herd.TaskChanges},
	}
	for verb, ok := range allowed {
		for _, s := range herd.TaskStates {
			err := Allowed(verb, s)
			want := false
			for _, o := range ok {
				want = want || o == s
			}
			if want && err != nil {
				t.Errorf("[%s %s] expected allowed, got %v", verb, s, err)
			}
			if !want && errs.KindOf(err) != errs.Conflict {
				t.Errorf("[%s %s] expected a conflict, got %v", verb, s, err)
			}
		}
	}
	if err := Allowed("merge", herd.TaskReview); !errs.IsBadInput(err) {
		t.Errorf("[unknown verb] expected bad input, got %v", err)
	}
}

func TestAfterCheck(t *testing.T) {
	for _, c := range []struct {
		passed            bool
		attempts, retries int
		want              herd.TaskState
		send              bool
	}{
		{true, 0, 2, herd.TaskReview, false},
		{true, 5, 2, herd.TaskReview, false},
		{false, 0, 2, herd.TaskWorking, true},
		{false, 1, 2, herd.TaskWorking, true},
		{false, 2, 2, herd.TaskNeedsYou, false},
		{false, 0, 0, herd.TaskNeedsYou, false},
	} {
		got, send := AfterCheck(c.passed, c.attempts, c.retries)
		if got != c.want || send != c.send {
			t.Errorf("[passed %v, %d of %d] expected %s send %v, got %s %v", c.passed, c.attempts, c.retries, c.want, c.send, got, send)
		}
	}
}

func TestAssign(t *testing.T) {
	q := func(id, role string) herd.Task { return herd.Task{ID: id, Role: role, State: herd.TaskQueued} }
	cand := func(name, role string, st herd.State, act herd.Activity, holds bool) Candidate {
		return Candidate{Replica: Replica{Name: name, State: st, Activity: act}, Role: role, Holds: holds}
	}
	const run, idle = herd.StateRunning, herd.ActivityIdle
	for _, c := range []struct {
		name     string
		queued   []herd.Task
		replicas []Candidate
		want     []Pair
	}{
		{"none free", []herd.Task{q("t-1", "w")}, []Candidate{cand("w-0", "w", run, herd.ActivityWorking, false), cand("w-1", "w", run, idle, true)}, nil},
		{"oldest first, one each",
			[]herd.Task{q("t-1", "w"), q("t-2", "w"), q("t-3", "w")},
			[]Candidate{cand("w-0", "w", run, idle, false), cand("w-1", "w", run, idle, false)},
			[]Pair{{"t-1", "w-0"}, {"t-2", "w-1"}}},
		{"by role", []herd.Task{q("t-1", "a"), q("t-2", "b")},
			[]Candidate{cand("b-0", "b", run, idle, false), cand("a-0", "a", herd.StatePending, idle, false)},
			[]Pair{{"t-2", "b-0"}}},
		{"not queued", []herd.Task{{ID: "t-1", Role: "w", State: herd.TaskWorking}}, []Candidate{cand("w-0", "w", run, idle, false)}, nil},
	} {
		if diff := cmp.Diff(c.want, Assign(c.queued, c.replicas)); diff != "" {
			t.Errorf("[%s] (-want +got):\n%s", c.name, diff)
		}
	}
}
