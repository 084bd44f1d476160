package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/taskflow"
	"herd/internal/worktree"
)

// withReactions gives the fixture a component with reactions rx, and
// returns what it told a person ("t-N reason").
func (f *fixture) withReactions(rx config.Reactions) func() []string {
	f.m = New(Options{Status: status.New(f.st, "h", herd.RestartPolicy{}, slog.Default()), Slots: f.fake, Inject: f.fake,
		Worktrees: &worktree.Manager{}, Dir: f.t.TempDir(), Log: slog.Default(), Reactions: func() config.Reactions { return rx }})
	var (
		mu   sync.Mutex
		told []string
	)
	f.m.o.Notify = func(_ context.Context, t herd.Task, reason, msg string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, t.ID+" "+reason)
	}
	return func() []string {
		f.m.group.Wait()
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), told...)
	}
}

// reactions returns the reaction events of task id, oldest first, as
// "kind action attempt[ escalated]".
func (f *fixture) reactions(id string) []string {
	var out []string
	err := f.st.View(context.Background(), func(tx store.Tx) error {
		evs, err := tx.Events(store.EventFilter{Kind: herd.EventReaction})
		for _, ev := range evs {
			if ev.Data["task"] != id {
				continue
			}
			s := fmt.Sprint(ev.Data["kind"], " ", ev.Data["action"], " ", ev.Data["attempt"])
			if ev.Data["escalated"] == true {
				s += " escalated"
			}
			out = append(out, s)
		}
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// TestEscalateUnansweredCheckFailure: a check failure typed into an
// agent that works on without ending its turn goes to a person once the
// reaction's escalate_after has passed (reason escalated, a reaction
// event that notifies); the loop wakes for that deadline; the agent
// still at work does not take the task back from the person, and its
// turn ending with a commit runs the check again.
func TestEscalateUnansweredCheckFailure(t *testing.T) {
	f := newFixture(t, []string{"sh", "-c", "test $(wc -l < WORK.md) -ge 2"})
	const after = 300 * time.Millisecond
	told := f.withReactions(config.Reactions{CheckFailed: config.Reaction{Action: config.ReactionSend, Retries: 2, EscalateAfter: after}})
	ctx := context.Background()
	wt := filepath.Join(f.repo, ".herd", "worktrees", "t-1")
	f.fake.agent = func(session, text string) {
		if strings.HasPrefix(text, "job") { // the prompt: one commit, turn ended
			commitIn(t, wt, "one")
			f.fake.turnEnd(session)
		}
		// The failure: it works on it and says nothing.
	}
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	got := f.settle("t-1", herd.TaskWorking)
	for got.Reacted == "" {
		got = f.settle("t-1", herd.TaskWorking)
	}
	if got.Reacted != herd.ReactionCheckFailed || got.ReactedAt == nil || got.Attempts != 1 {
		t.Fatalf("expected the check's failure sent and waited on, got %+v", got)
	}
	// Before the deadline nothing changes; the loop wakes for it.
	if err := f.m.round(ctx); err != nil {
		t.Fatal(err)
	}
	if d := f.m.nextWake(time.Now()); d <= 0 || d > after+20*time.Millisecond {
		t.Errorf("expected the loop to wake at the escalation (within %s), got %s", after, d)
	}
	if got := f.get("t-1"); got.State != herd.TaskWorking {
		t.Fatalf("expected working before escalate_after, got %s (%s)", got.State, got.Reason)
	}
	time.Sleep(time.Until(got.ReactedAt.Add(after)))
	got = f.settle("t-1", herd.TaskNeedsYou)
	if got.Reason != taskflow.ReasonEscalated || got.Reacted != "" || got.ReactedAt != nil {
		t.Errorf("expected needs_you (escalated) with the reaction cleared, got %+v", got)
	}
	if want := []string{"check_failed send 1", "check_failed notify 2 escalated"}; !equal(f.reactions("t-1"), want) {
		t.Errorf("expected reactions %q, got %q", want, f.reactions("t-1"))
	}
	if got := told(); len(got) != 1 || got[0] != "t-1 escalated" {
		t.Errorf("expected a person told once (escalated), got %q", got)
	}
	// The agent is still at work: the task stays with the person.
	if err := f.st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.Session(got.Session)
		s.Activity = herd.ActivityWorking
		if err != nil {
			return err
		}
		return tx.PutSession(s)
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.m.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.get("t-1"); got.State != herd.TaskNeedsYou {
		t.Errorf("expected an escalated task to stay before a person while its agent works, got %s", got.State)
	}
	// Its turn ends with the fix: the check runs and passes.
	commitIn(t, wt, "two")
	f.fake.turnEnd(got.Session)
	f.settle("t-1", herd.TaskReview)
}

// TestNoWakeAfterTheLastReaction: regression — a task cancelled while a
// reaction waited on its agent leaves the loop no deadline to wake for
// (it woke every 250 ms for the past one, the store read each time).
func TestNoWakeAfterTheLastReaction(t *testing.T) {
	f := newFixture(t, []string{"false"})
	f.withReactions(config.Reactions{CheckFailed: config.Reaction{Action: config.ReactionSend, Retries: 2, EscalateAfter: time.Hour}})
	ctx := context.Background()
	f.fake.agent = func(session, text string) {
		if text == "job" {
			commitIn(t, filepath.Join(f.repo, ".herd", "worktrees", "t-1"), "one")
			f.fake.turnEnd(session)
		}
	}
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	for f.get("t-1").Reacted == "" {
		f.settle("t-1", herd.TaskWorking)
	}
	if err := f.m.round(ctx); err != nil {
		t.Fatal(err)
	}
	if d := f.m.nextWake(time.Now()); d < 59*time.Minute {
		t.Fatalf("expected a wake at the escalation an hour ahead, got %s", d)
	}
	if _, err := f.m.Verb(ctx, taskflow.VerbCancel, VerbRequest{ID: "t-1"}); err != nil {
		t.Fatal(err)
	}
	f.m.group.Wait()
	if err := f.m.round(ctx); err != nil {
		t.Fatal(err)
	}
	if d := f.m.nextWake(time.Now()); d != 0 {
		t.Errorf("expected no deadline left, got a wake in %s", d)
	}
}

// TestNudgeStalledAgent: with [reactions.agent_stuck] sending, a stalled
// agent holding a task is nudged, again after escalate_after while it
// stays stalled, and then a person is needed; a nudge it answers (no
// longer stalled) is forgotten.
func TestNudgeStalledAgent(t *testing.T) {
	f := newFixture(t, nil)
	const after = 200 * time.Millisecond
	told := f.withReactions(config.Reactions{AgentStuck: config.Reaction{Action: config.ReactionSend, Retries: 2, EscalateAfter: after}})
	ctx := context.Background()
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	got := f.settle("t-1", herd.TaskWorking)
	setState := func(st herd.State) {
		t.Helper()
		if err := f.st.Update(ctx, func(tx store.Tx) error {
			s, err := tx.Session(got.Session)
			if err != nil {
				return err
			}
			s.State, s.Activity = st, herd.ActivityWorking
			return tx.PutSession(s)
		}); err != nil {
			t.Fatal(err)
		}
	}
	nudges := func() int {
		n := 0
		for _, s := range f.fake.typed {
			if strings.Contains(s, "nothing has come from you") {
				n++
			}
		}
		return n
	}
	round := func() {
		t.Helper()
		if err := f.m.round(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Stalled, then answered.
	setState(herd.StateStalled)
	round()
	if got = f.get("t-1"); got.State != herd.TaskWorking || got.Reacted != herd.ReactionAgentStuck || got.Nudges != 1 || nudges() != 1 {
		t.Fatalf("expected one nudge, got %+v, typed %q", got, f.fake.typed)
	}
	round() // still stalled, before escalate_after: nothing more
	if nudges() != 1 {
		t.Fatalf("expected no second nudge before escalate_after, typed %q", f.fake.typed)
	}
	setState(herd.StateRunning)
	round()
	if got = f.get("t-1"); got.State != herd.TaskWorking || got.Reacted != "" {
		t.Fatalf("expected the answered nudge forgotten, got %+v", got)
	}

	// Stalled again: the second nudge, then a person.
	setState(herd.StateStalled)
	round()
	if got = f.get("t-1"); got.Nudges != 2 || nudges() != 2 {
		t.Fatalf("expected the second nudge, got %+v", got)
	}
	time.Sleep(time.Until(got.ReactedAt.Add(after)))
	got = f.settle("t-1", herd.TaskNeedsYou)
	if got.Reason != taskflow.ReasonAgentStuck || nudges() != 2 {
		t.Errorf("expected needs_you (agent_stuck) after two nudges, got %+v, %d nudges", got, nudges())
	}
	if want := []string{"agent_stuck send 1", "agent_stuck send 2", "agent_stuck notify 3"}; !equal(f.reactions("t-1"), want) {
		t.Errorf("expected reactions %q, got %q", want, f.reactions("t-1"))
	}
	if got := told(); len(got) != 1 || got[0] != "t-1 agent_stuck" {
		t.Errorf("expected a person told once (agent_stuck), got %q", got)
	}
}

// TestChangesRequested: a review's comments go to the agent and wait on
// it (escalate_after counts); with [reactions.changes_requested]
// notifying they are kept for a person instead, and nothing is typed.
func TestChangesRequested(t *testing.T) {
	for _, action := range []string{config.ReactionSend, config.ReactionNotify} {
		t.Run(action, func(t *testing.T) {
			f := newFixture(t, nil)
			told := f.withReactions(config.Reactions{ChangesRequested: config.Reaction{Action: action, EscalateAfter: time.Hour}})
			ctx := context.Background()
			f.fake.agent = func(session, text string) {
				commitIn(t, filepath.Join(f.repo, ".herd", "worktrees", "t-1"), "one")
				f.fake.turnEnd(session)
			}
			if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
				t.Fatal(err)
			}
			f.settle("t-1", herd.TaskReview)
			f.fake.agent = nil
			got, err := f.m.Verb(ctx, taskflow.VerbComment, VerbRequest{ID: "t-1", Text: "rename <x> to y", By: "ana"})
			if err != nil {
				t.Fatal(err)
			}
			typed := len(f.fake.typed)
			if action == config.ReactionSend {
				if got.State != herd.TaskChanges || got.Reacted != herd.ReactionChangesRequested || typed != 2 {
					t.Errorf("expected changes, waited on, the comments typed, got %+v, typed %q", got, f.fake.typed)
				}
				if want := []string{"changes_requested send 1"}; !equal(f.reactions("t-1"), want) {
					t.Errorf("expected reactions %q, got %q", want, f.reactions("t-1"))
				}
				return
			}
			if got.State != herd.TaskNeedsYou || got.Reason != herd.ReactionChangesRequested || got.Reacted != "" || typed != 1 {
				t.Errorf("expected needs_you (changes_requested), nothing typed, got %+v, typed %q", got, f.fake.typed)
			}
			// Regression: the turn that ended before the review does not
			// put the task back in review behind the person's back.
			for range 3 {
				if err := f.m.round(ctx); err != nil {
					t.Fatal(err)
				}
				f.m.group.Wait()
			}
			if got := f.get("t-1"); got.State != herd.TaskNeedsYou {
				t.Errorf("expected the task kept before a person, got %s", got.State)
			}
			if want := []string{"changes_requested notify 1"}; !equal(f.reactions("t-1"), want) {
				t.Errorf("expected reactions %q, got %q", want, f.reactions("t-1"))
			}
			if got := told(); len(got) != 2 || got[1] != "t-1 changes_requested" {
				t.Errorf("expected a person told (review, then changes_requested), got %q", got)
			}
			d, err := f.m.Describe(ctx, "t-1")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, ev := range d.Events {
				found = found || (ev.Kind == herd.EventTaskNeedsYou && strings.Contains(ev.Message, "rename <x> to y") && strings.Contains(ev.Message, "ana"))
			}
			if !found {
				t.Errorf("expected the comments and who made them in the task's story, got %+v", d.Events)
			}
		})
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }
