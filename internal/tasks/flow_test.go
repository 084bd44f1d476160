package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/verbs"
	"herd/internal/worktree"
)

// fakeHerd stands in for slots and the verb layer: a relaunch gives the
// session a new incarnation (running, idle), and what is typed into it
// is handed to the agent function, which plays a turn.
type fakeHerd struct {
	t     testing.TB
	st    store.Store
	mu    sync.Mutex
	n     int
	typed []string
	// agent plays a turn on text typed into session; nil: no turn.
	agent func(session, text string)
}

func (f *fakeHerd) Restart(ctx context.Context, req slots.RestartRequest) (string, error) {
	f.mu.Lock()
	f.n++
	inc := fmt.Sprintf("inc-%d", f.n)
	f.mu.Unlock()
	err := f.st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.Session(req.Name)
		if err != nil {
			return err
		}
		s.Incarnation, s.State, s.Activity = inc, herd.StateRunning, herd.ActivityIdle
		if err := tx.PutSession(s); err != nil {
			return err
		}
		return tx.PutIncarnation(herd.Incarnation{ID: inc, Session: req.Name, Host: "h", StartedAt: time.Now(), AgentSessionID: "conv-" + inc})
	})
	return inc, err
}

func (f *fakeHerd) Inject(ctx context.Context, req verbs.InjectRequest) (verbs.Result, error) {
	f.mu.Lock()
	f.typed = append(f.typed, req.Name+": "+req.Text)
	agent := f.agent
	f.mu.Unlock()
	if agent != nil {
		agent(req.Name, req.Text)
	}
	return verbs.Result{}, nil
}

// turnEnd records the activity events of a turn of session's current
// incarnation: working, then idle.
func (f *fakeHerd) turnEnd(session string) {
	err := f.st.Update(context.Background(), func(tx store.Tx) error {
		s, err := tx.Session(session)
		if err != nil {
			return err
		}
		for _, to := range []herd.Activity{herd.ActivityWorking, herd.ActivityIdle} {
			if err := tx.AppendEvent(&herd.Event{Time: time.Now(), Host: "h", Session: session, Incarnation: s.Incarnation,
				Kind: herd.EventActivity, Data: map[string]any{"to": string(to)}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.t.Error(err)
	}
}

func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commitIn appends text to WORK.md in dir and commits it.
func commitIn(t *testing.T, dir, text string) {
	f, err := os.OpenFile(filepath.Join(dir, "WORK.md"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	fmt.Fprintln(f, text)
	f.Close()
	gitIn(t, dir, "add", "WORK.md")
	gitIn(t, dir, "commit", "-q", "-m", "work")
}

type fixture struct {
	t    *testing.T
	st   store.Store
	fake *fakeHerd
	repo string
	m    *Manager
}

// newFixture is a store with a task role of two idle replicas, a
// repository on main, and the component over them (not running: the
// test drives its rounds).
func newFixture(t *testing.T, check []string) *fixture {
	t.Helper()
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "first")
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.PutRole(herd.Role{Name: "w", Replicas: 2, Command: []string{"agent"}, Workdir: repo, Runtime: herd.RuntimeTmux,
			Tasks: true, Check: check, CheckTimeout: 20 * time.Second}); err != nil {
			return err
		}
		for i := range 2 {
			name := herd.SessionName("w", i)
			if err := tx.PutSession(herd.Session{Name: name, Role: "w", Index: i, Host: "h", State: herd.StateRunning,
				Activity: herd.ActivityIdle, Incarnation: "first-" + name, RuntimeKind: herd.RuntimeTmux}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, repo: repo, fake: &fakeHerd{t: t, st: st}}
	f.m = f.newManager()
	return f
}

func (f *fixture) newManager() *Manager {
	return New(Options{Status: status.New(f.st, "h", herd.RestartPolicy{}, slog.Default()), Slots: f.fake, Inject: f.fake,
		Worktrees: &worktree.Manager{}, Dir: f.t.TempDir(), Log: slog.Default()})
}

// settle runs rounds, waiting for checks and landings, until task id is
// in state want (or fails the test).
func (f *fixture) settle(id string, want herd.TaskState) herd.Task {
	f.t.Helper()
	var t herd.Task
	for range 50 {
		if err := f.m.round(context.Background()); err != nil {
			f.t.Fatal(err)
		}
		f.m.group.Wait()
		t = f.get(id)
		if t.State == want {
			return t
		}
	}
	f.t.Fatalf("task %s: expected %s, stuck in %s (%s)", id, want, t.State, t.Reason)
	return t
}

func (f *fixture) get(id string) herd.Task {
	var t herd.Task
	if err := f.st.View(context.Background(), func(tx store.Tx) (err error) { t, err = tx.Task(id); return err }); err != nil {
		f.t.Fatal(err)
	}
	return t
}

// TestTaskFlow drives one task through the component with a stand-in
// for the agent: assigned to the first free replica, relaunched in its
// worktree, the prompt typed once; a turn with a commit → the check
// fails → its output goes back → a second commit → review → approved →
// landed on main, the worktree and branch gone. A second task waits for
// the other replica; a third for the first to be free again.
func TestTaskFlow(t *testing.T) {
	f := newFixture(t, []string{"sh", "-c", "test $(wc -l < WORK.md) -ge 2 || { echo 'want two lines'; exit 1; }"})
	ctx := context.Background()
	wt := func(id string) string { return filepath.Join(f.repo, ".herd", "worktrees", id) }
	f.fake.agent = func(session, text string) {
		held, _ := f.m.List(ctx, store.TaskFilter{Held: session})
		if len(held) != 1 {
			t.Errorf("typed into %s, which holds %d tasks", session, len(held))
			return
		}
		commitIn(t, wt(held[0].ID), strings.SplitN(text, "\n", 2)[0])
		f.fake.turnEnd(session) // after the cursor the delivery is read from
	}
	var ids []string
	for _, p := range []string{"first", "second", "third"} {
		task, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: p + " job"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	if ids[0] != "t-1" || f.get("t-1").Base != "main" || f.get("t-1").Repo != f.repo {
		t.Fatalf("expected t-1 on main of %s, got %+v", f.repo, f.get("t-1"))
	}
	one := f.settle("t-1", herd.TaskWorking)
	if one.Session != "w-0" || one.Incarnation == "" || one.Worktree != wt("t-1") || one.Branch != "herd/t-1" {
		t.Errorf("[working] expected t-1 on w-0 in its worktree, got %+v", one)
	}
	one = f.settle("t-1", herd.TaskReview)
	if one.Commits != 2 || one.Attempts != 1 || !strings.Contains(one.CheckTail, "") {
		t.Errorf("[review] expected 2 commits after one failure sent back, got %+v", one)
	}
	two := f.settle("t-2", herd.TaskReview)
	if two.Session != "w-1" {
		t.Errorf("[second] expected w-1, got %s", two.Session)
	}
	if three := f.get("t-3"); three.State != herd.TaskQueued {
		t.Errorf("[third] expected queued while both replicas hold a task, got %s", three.State)
	}
	f.fake.mu.Lock()
	typed := strings.Join(f.fake.typed, "\n---\n")
	f.fake.mu.Unlock()
	if strings.Count(typed, "w-0: first job") != 1 || !strings.Contains(typed, "The check of task t-1") || !strings.Contains(typed, "want two lines") {
		t.Errorf("[typed] expected the prompt once and the check's failure, got:\n%s", typed)
	}

	if _, err := f.m.Verb(ctx, "approve", VerbRequest{ID: "t-1", By: "me"}); err != nil {
		t.Fatal(err)
	}
	one = f.settle("t-1", herd.TaskLanded)
	if main := gitIn(t, f.repo, "rev-parse", "main"); one.Landed != main {
		t.Errorf("[landed] expected main at %s, got %s", one.Landed, main)
	}
	if _, err := os.Stat(wt("t-1")); !os.IsNotExist(err) {
		t.Errorf("[landed] expected the worktree gone, got %v", err)
	}
	if b := gitIn(t, f.repo, "branch", "--list", "herd/t-1"); b != "" {
		t.Errorf("[landed] expected the branch gone, got %q", b)
	}
	// The freed replica takes the third task.
	if three := f.settle("t-3", herd.TaskReview); three.Session != "w-0" {
		t.Errorf("[third] expected w-0, got %s", three.Session)
	}
	d, err := f.m.Describe(ctx, "t-1")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range d.Events {
		k := ev.Kind
		if ev.Kind == herd.EventReaction || ev.Kind == herd.EventTaskChecked {
			k += ":" + ev.Reason
		}
		kinds = append(kinds, k)
	}
	want := "task_queued task_assigned task_delivered task_checked:failed reaction:check_failed task_checked:passed task_review reaction:approved task_landed"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("[events] expected\n%s\ngot\n%s", want, got)
	}
}

// TestTaskRestartMidway: a daemon gone after the assignment (before the
// relaunch) and one gone after the delivery: the next component goes on
// from the store, the prompt typed once per agent.
func TestTaskRestartMidway(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	w, err := f.m.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.m.assign(ctx, w) // then the daemon is gone
	if got := f.get("t-1"); got.State != herd.TaskAssigned || got.Incarnation != "" {
		t.Fatalf("expected t-1 assigned, not relaunched, got %+v", got)
	}
	f.m = f.newManager()
	got := f.settle("t-1", herd.TaskWorking)
	f.m = f.newManager()
	for range 3 {
		if err := f.m.round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if now := f.get("t-1"); now.State != herd.TaskWorking || now.Incarnation != got.Incarnation {
		t.Errorf("expected t-1 working in %s still, got %+v", got.Incarnation, now)
	}
	if n := len(f.fake.typed); n != 1 {
		t.Errorf("expected the prompt typed once, got %d: %q", n, f.fake.typed)
	}
	// A turn ended without a commit: a person is needed.
	f.fake.turnEnd(got.Session)
	if now := f.settle("t-1", herd.TaskNeedsYou); now.Reason != "no_commit" {
		t.Errorf("expected no_commit, got %q", now.Reason)
	}
	// Cancelled: its replica is free, its branch kept; retried: queued.
	if _, err := f.m.Verb(ctx, "cancel", VerbRequest{ID: "t-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Verb(ctx, "approve", VerbRequest{ID: "t-1"}); err == nil || !strings.Contains(err.Error(), "cannot approve a task that is cancelled") {
		t.Errorf("expected approve of a cancelled task refused, got %v", err)
	}
	if b := gitIn(t, f.repo, "branch", "--list", "herd/t-1"); b == "" {
		t.Errorf("expected the cancelled task's branch kept")
	}
	if _, err := f.m.Verb(ctx, "retry", VerbRequest{ID: "t-1"}); err != nil {
		t.Fatal(err)
	}
	if now := f.get("t-1"); now.State != herd.TaskQueued || now.Session != "" {
		t.Errorf("expected t-1 queued again, got %+v", now)
	}
}

// TestLandAgainAfterDeath: a daemon that moved the base and died before
// it wrote the task landed: the next one finds nothing left to land and
// records it landed on that commit, once.
func TestLandAgainAfterDeath(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.fake.agent = func(session, text string) {
		commitIn(t, filepath.Join(f.repo, ".herd", "worktrees", "t-1"), text)
		f.fake.turnEnd(session)
	}
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	f.settle("t-1", herd.TaskReview)
	if _, err := f.m.Verb(ctx, "approve", VerbRequest{ID: "t-1", By: "me"}); err != nil {
		t.Fatal(err)
	}
	// The landing of the daemon that died.
	l, err := (&worktree.Manager{}).Land(ctx, worktree.LandOptions{Repo: f.repo, Branch: "herd/t-1", Base: "main"})
	if err != nil {
		t.Fatal(err)
	}
	f.m = f.newManager()
	got := f.settle("t-1", herd.TaskLanded)
	if got.Landed != l.New || gitIn(t, f.repo, "rev-parse", "main") != l.New {
		t.Errorf("expected landed at %s with main there, got %+v", l.New, got)
	}
}

// TestCheckFailedNotify: with [reactions.check_failed] action = "notify"
// a failed check goes to a person at once; nothing is typed back.
func TestCheckFailedNotify(t *testing.T) {
	f := newFixture(t, []string{"false"})
	f.m = New(Options{Status: status.New(f.st, "h", herd.RestartPolicy{}, slog.Default()), Slots: f.fake, Inject: f.fake,
		Worktrees: &worktree.Manager{}, Dir: t.TempDir(), Log: slog.Default(),
		Reactions: func() config.Reactions {
			return config.Reactions{CheckFailed: config.Reaction{Action: config.ReactionNotify, Retries: 5}, Conflict: config.Reaction{Action: config.ReactionSend}}
		}})
	var (
		mu   sync.Mutex
		told []string
	)
	f.m.o.Notify = func(_ context.Context, t herd.Task, reason, msg string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, t.ID+" "+reason)
	}
	ctx := context.Background()
	f.fake.agent = func(session, text string) {
		commitIn(t, filepath.Join(f.repo, ".herd", "worktrees", "t-1"), text)
		f.fake.turnEnd(session)
	}
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	got := f.settle("t-1", herd.TaskNeedsYou)
	if got.Reason != "check_failed" || got.Attempts != 0 || len(f.fake.typed) != 1 {
		t.Errorf("expected needs_you (check_failed) with only the prompt typed, got %+v, typed %q", got, f.fake.typed)
	}
	// Regression: the turn that was checked does not send the task back
	// to its check (it went round check → needs_you → check for ever).
	for range 3 {
		if err := f.m.round(ctx); err != nil {
			t.Fatal(err)
		}
		f.m.group.Wait()
	}
	if got := f.get("t-1"); got.State != herd.TaskNeedsYou || got.CheckLog != filepath.Join(f.m.o.Dir, "t-1", "check-1.log") {
		t.Errorf("expected the task to stay before a person, its check run once, got %s, %s", got.State, got.CheckLog)
	}
	f.m.group.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 1 || told[0] != "t-1 check_failed" {
		t.Errorf("expected one notification of t-1 (check_failed), got %q", told)
	}
}

// TestRoleDeletedEndsItsTasks: the tasks of a task role deleted while
// they were queued or held end failed (role_deleted).
func TestRoleDeletedEndsItsTasks(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for range 3 {
		if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
			t.Fatal(err)
		}
	}
	f.settle("t-1", herd.TaskWorking)
	if err := f.st.Update(ctx, func(tx store.Tx) error { return tx.DeleteRole("w") }); err != nil {
		t.Fatal(err)
	}
	if err := f.m.round(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		if got := f.get(id); got.State != herd.TaskFailed || got.Reason != "role_deleted" {
			t.Errorf("[%s] expected failed (role_deleted), got %s (%s)", id, got.State, got.Reason)
		}
	}
}

// TestQueueDemand: with max_replicas the queue asks for a replica per
// held or queued task, up to max_replicas; the replicas holding a task
// are kept; once fewer are needed the demand drops only after
// scale_down_after, and the reconciler is woken at each change.
func TestQueueDemand(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	err := f.st.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Role("w")
		if err != nil {
			return err
		}
		r.MaxReplicas, r.ScaleDownAfter = 5, 300*time.Millisecond
		return tx.PutRole(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	kicks := 0
	f.m.o.Reconcile = func() { kicks++ }
	if d := f.m.Demand(); d.Known {
		t.Errorf("expected the demand unknown before a round, got %+v", d)
	}
	for range 7 {
		if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
			t.Fatal(err)
		}
	}
	f.settle("t-2", herd.TaskWorking)
	d := f.m.Demand()
	if !d.Known || d.Want["w"] != 5 || !d.Keep["w-0"] || !d.Keep["w-1"] || len(d.Keep) != 2 || kicks == 0 {
		t.Errorf("expected 5 wanted (7 tasks, max 5), w-0 and w-1 kept, a kick; got %+v, %d kicks", d, kicks)
	}
	for _, id := range []string{"t-1", "t-2", "t-3", "t-4", "t-5", "t-6", "t-7"} {
		if _, err := f.m.Verb(ctx, "cancel", VerbRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	// The cancelled tasks' replicas are relaunched out of their worktrees
	// beside the loop, and kept while that runs: once it is done, nothing
	// is (a round before then saw a replica under its relaunch kept).
	f.m.group.Wait()
	if err := f.m.round(ctx); err != nil {
		t.Fatal(err)
	}
	if d := f.m.Demand(); d.Want["w"] != 5 || len(d.Keep) != 0 {
		t.Errorf("expected 5 still wanted within scale_down_after and nothing kept, got %+v", d)
	}
	if next := f.m.nextScaleDown(time.Now()); next <= 0 || next > 300*time.Millisecond {
		t.Errorf("expected a wake-up within scale_down_after, got %s", next)
	}
	time.Sleep(350 * time.Millisecond)
	if err := f.m.round(ctx); err != nil {
		t.Fatal(err)
	}
	if d := f.m.Demand(); d.Want["w"] != 0 {
		t.Errorf("expected the demand dropped after scale_down_after, got %+v", d)
	}
}

// TestLandsWhatWasReviewed: a commit made on the branch after its check
// passed (the agent went on) does not land, and it is not lost: the
// branch and worktree are kept. While landing, the task's verbs are
// refused.
func TestLandsWhatWasReviewed(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	wt := filepath.Join(f.repo, ".herd", "worktrees", "t-1")
	f.fake.agent = func(session, text string) {
		commitIn(t, wt, text)
		f.fake.turnEnd(session)
	}
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	reviewed := f.settle("t-1", herd.TaskReview)
	if reviewed.Reviewed == "" || reviewed.Reviewed != gitIn(t, f.repo, "rev-parse", "herd/t-1") {
		t.Fatalf("expected the reviewed commit recorded, got %+v", reviewed)
	}
	commitIn(t, wt, "after the review")
	later := gitIn(t, f.repo, "rev-parse", "herd/t-1")
	if _, err := f.m.Verb(ctx, "approve", VerbRequest{ID: "t-1", By: "me"}); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"cancel", "retry", "comment", "approve"} {
		if _, err := f.m.Verb(ctx, verb, VerbRequest{ID: "t-1", Text: "x"}); err == nil || !strings.Contains(err.Error(), "is landing") {
			t.Errorf("[%s while landing] expected refused, got %v", verb, err)
		}
	}
	f.settle("t-1", herd.TaskLanded)
	if out := gitIn(t, f.repo, "merge-base", "--is-ancestor", reviewed.Reviewed, "main"); out != "" {
		t.Fatal(out)
	}
	cmd := exec.Command("git", "merge-base", "--is-ancestor", later, "main")
	cmd.Dir = f.repo
	if cmd.Run() == nil {
		t.Errorf("expected the commit made after the review not landed")
	}
	if got := gitIn(t, f.repo, "rev-parse", "herd/t-1"); got != later {
		t.Errorf("expected the branch kept at %s, got %s", later, got)
	}
	if _, err := os.Stat(wt); err != nil {
		t.Errorf("expected the worktree kept: %v", err)
	}
}

// TestLandCheckPrepared: the check of a landing runs on the merge result
// prepared as the task's worktree was (the role's included files, its
// setup): a check that needs an untracked .env passes there too.
func TestLandCheckPrepared(t *testing.T) {
	f := newFixture(t, []string{"sh", "-c", "test -f .env && test -f setup-ran"})
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(f.repo, ".env"), []byte("TOKEN=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := f.st.Update(ctx, func(tx store.Tx) error {
		r, err := tx.Role("w")
		if err != nil {
			return err
		}
		r.WorktreeInclude, r.WorktreeSetup = []string{".env"}, []string{"touch", "setup-ran"}
		return tx.PutRole(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.fake.agent = func(session, text string) {
		commitIn(t, filepath.Join(f.repo, ".herd", "worktrees", "t-1"), text)
		f.fake.turnEnd(session)
	}
	if _, err := f.m.Add(ctx, AddRequest{Role: "w", Prompt: "job"}); err != nil {
		t.Fatal(err)
	}
	f.settle("t-1", herd.TaskReview)
	if _, err := f.m.Verb(ctx, "approve", VerbRequest{ID: "t-1", By: "me"}); err != nil {
		t.Fatal(err)
	}
	if got := f.settle("t-1", herd.TaskLanded); got.Landed == "" {
		t.Errorf("expected landed, got %+v", got)
	}
}
