package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/config"
	"herd/internal/store"
	"herd/internal/taskflow"
)

// tailBytes bounds the end of a check's output kept with the task and
// sent to its agent.
const tailBytes = 4 << 10

// checkGrace is how long a check that overran its time gets after
// SIGTERM before SIGKILL.
const checkGrace = 5 * time.Second

// ranCheck is how one run of a check ended.
type ranCheck struct {
	Exit int // -1: it did not run to an exit (timed out, could not start)
	Err  error
	Tail string
	Log  string
}

// Passed reports whether the check passed.
func (r ranCheck) Passed() bool { return r.Exit == 0 && r.Err == nil }

// claim marks a task's check or landing as running; false when one
// already is.
func (m *Manager) claim(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.busy[id] {
		return false
	}
	m.busy[id] = true
	return true
}

func (m *Manager) release(id string) {
	m.mu.Lock()
	delete(m.busy, id)
	m.mu.Unlock()
	m.Kick()
}

// startCheck runs the task's check in the background (once at a time
// per task; a daemon that died during one runs it again).
func (m *Manager) startCheck(t herd.Task, role herd.Role) {
	if !m.claim(t.ID) {
		return
	}
	m.group.Go("task check "+t.ID, func() {
		defer m.release(t.ID)
		ctx, cancel := context.WithTimeout(m.runCtx(), checkTimeout(role)+time.Minute)
		defer cancel()
		if err := m.check(ctx, t, role); err != nil && !errors.Is(err, errStale) && ctx.Err() == nil {
			m.log.Warn("tasks: check", "task", t.ID, "err", err)
		}
	})
}

func checkTimeout(role herd.Role) time.Duration {
	if role.CheckTimeout > 0 {
		return role.CheckTimeout
	}
	return herd.DefaultCheckTimeout
}

// check runs the check and reacts to its result: review when it passed;
// else the failure goes back to the agent (check_failed) until the
// retries are spent, then a person is needed.
func (m *Manager) check(ctx context.Context, t herd.Task, role herd.Role) error {
	// The commit checked: what a person reviews and what lands.
	tip, err := m.o.Worktrees.Tip(ctx, t.Repo, t.Branch)
	if err != nil {
		return m.fail(ctx, t, taskflow.ReasonBranchGone, fmt.Sprintf("task %s: its branch %s: %v", t.ID, t.Branch, err))
	}
	if len(t.Check) == 0 {
		return m.write(ctx, t.ID, []herd.TaskState{herd.TaskChecking}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			t.State, t.Reviewed = herd.TaskReview, tip
			return []*herd.Event{m.event(*t, herd.EventTaskReview, "no_check", fmt.Sprintf("task %s is ready for review (%d commit(s); no check)", t.ID, t.Commits), nil)}, nil
		})
	}
	n := t.Attempts + 1
	res := m.run(ctx, t.ID+"-check-"+fmt.Sprint(n), t.Worktree, t.Check, checkTimeout(role), m.logPath(t.ID, n))
	react := m.o.Reactions().CheckFailed
	retries := react.Retries
	if react.Action == config.ReactionNotify {
		retries = 0
	}
	next, sendBack := taskflow.AfterCheck(res.Passed(), t.Attempts, retries)
	checked := func(t herd.Task) *herd.Event {
		reason := "passed"
		if !res.Passed() {
			reason = "failed"
		}
		msg := fmt.Sprintf("task %s: check %s %s (exit %d)", t.ID, strings.Join(t.Check, " "), reason, res.Exit)
		if res.Err != nil {
			msg = fmt.Sprintf("task %s: check %s failed: %v", t.ID, strings.Join(t.Check, " "), res.Err)
		}
		return m.event(t, herd.EventTaskChecked, reason, msg, map[string]any{"exit": res.Exit, "log": res.Log})
	}
	record := func(t *herd.Task) {
		t.CheckLog, t.CheckTail, t.CheckExit = res.Log, res.Tail, res.Exit
	}
	switch {
	case next == herd.TaskReview:
		return m.write(ctx, t.ID, []herd.TaskState{herd.TaskChecking}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
			record(t)
			t.State, t.Reviewed = herd.TaskReview, tip
			return []*herd.Event{checked(*t), m.event(*t, herd.EventTaskReview, "", fmt.Sprintf("task %s is ready for review: %d commit(s) on %s, its check passed", t.ID, t.Commits, t.Branch), nil)}, nil
		})
	case sendBack:
		text := checkFailedText(t, res)
		return m.react(ctx, t, []herd.TaskState{herd.TaskChecking}, herd.ReactionCheckFailed, text, func(t herd.Task) []*herd.Event {
			return []*herd.Event{checked(t), m.event(t, herd.EventReaction, herd.ReactionCheckFailed,
				fmt.Sprintf("task %s: the check's failure sent to %s (attempt %d of %d)", t.ID, t.Session, t.Attempts, retries),
				map[string]any{"kind": herd.ReactionCheckFailed, "attempt": t.Attempts, "action": "send"})}
		}, func(t *herd.Task) {
			record(t)
			t.State, t.Attempts = herd.TaskWorking, t.Attempts+1
		})
	}
	return m.write(ctx, t.ID, []herd.TaskState{herd.TaskChecking}, func(t *herd.Task, tx store.Tx) ([]*herd.Event, error) {
		record(t)
		t.State, t.Reason = herd.TaskNeedsYou, taskflow.ReasonCheckFailed
		msg := fmt.Sprintf("task %s: its check still fails after %d attempt(s) sent back to the agent", t.ID, t.Attempts)
		return []*herd.Event{checked(*t), m.event(*t, herd.EventTaskNeedsYou, taskflow.ReasonCheckFailed, msg, nil),
			m.event(*t, herd.EventReaction, herd.ReactionCheckFailed, msg,
				map[string]any{"kind": herd.ReactionCheckFailed, "attempt": t.Attempts + 1, "action": "notify"})}, nil
	})
}

// checkFailedText is what the agent is told of a failed check.
func checkFailedText(t herd.Task, res ranCheck) string {
	how := fmt.Sprintf("exited with %d", res.Exit)
	if res.Err != nil {
		how = res.Err.Error()
	}
	return fmt.Sprintf("The check of task %s (%s) failed: %s. The end of its output:\n\n%s\n\nFix the cause and commit the fix on this branch.",
		t.ID, strings.Join(t.Check, " "), how, strings.TrimSpace(res.Tail))
}

// run runs argv in dir, contained (a cgroup of its own where the host
// allows, its own process group, ended whole when it overruns timeout),
// its output to logPath and its tail returned.
func (m *Manager) run(ctx context.Context, id, dir string, argv []string, timeout time.Duration, logPath string) ranCheck {
	res := ranCheck{Exit: -1, Log: logPath}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		res.Err = err
		return res
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		res.Err = err
		return res
	}
	defer f.Close()
	tail := &tailBuffer{max: tailBytes}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout = io.MultiWriter(f, tail)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), herd.EnvIncarnation+"="+id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = checkGrace
	var launch *cgroup.Launch
	if m.o.Contain != nil {
		if launch, err = m.o.Contain.Prepare(id, cgroup.Limits{}); err != nil {
			res.Err = fmt.Errorf("contain the check: %w", err)
			return res
		}
		launch.Apply(cmd.SysProcAttr)
	}
	err = cmd.Start()
	if launch != nil {
		launch.Close()
	}
	if err != nil {
		res.Err = fmt.Errorf("start %s: %w", argv[0], err)
		res.Tail = res.Err.Error()
		m.releaseCheck(id)
		return res
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		err = m.endCheck(cmd, id, done)
		res.Err = fmt.Errorf("timed out after %s", timeout)
	case <-ctx.Done():
		err = m.endCheck(cmd, id, done)
		res.Err = ctx.Err()
	}
	m.releaseCheck(id)
	res.Tail = tail.String()
	if res.Err == nil {
		var ee *exec.ExitError
		switch {
		case err == nil:
			res.Exit = 0
		case errors.As(err, &ee) && ee.Exited():
			res.Exit = ee.ExitCode()
		default:
			res.Err = err
		}
	}
	return res
}

// endCheck ends a check that overran and returns its Wait: its cgroup
// TERM then KILL after a grace, or without a cgroup its process group,
// signalled only while the check's Wait has not returned (the group's
// leader not yet reaped: the group is the check's).
func (m *Manager) endCheck(cmd *exec.Cmd, id string, done <-chan error) error {
	if m.o.Contain != nil && m.o.Contain.Mode() == cgroup.ModeCgroup {
		_, _ = m.o.Contain.Stop(context.Background(), id, checkGrace)
		return <-done
	}
	pg := -cmd.Process.Pid
	_ = syscall.Kill(pg, syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(checkGrace):
		_ = syscall.Kill(pg, syscall.SIGKILL)
	}
	return <-done
}

// releaseCheck removes what containment made for a check.
func (m *Manager) releaseCheck(id string) {
	if m.o.Contain != nil {
		_ = m.o.Contain.Release(context.Background(), id)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= b.max {
		b.buf.Reset()
		b.buf.Write(p[len(p)-b.max:])
		return n, nil
	}
	if over := b.buf.Len() + len(p) - b.max; over > 0 {
		b.buf.Next(over)
	}
	b.buf.Write(p)
	return n, nil
}

func (b *tailBuffer) String() string { return strings.ToValidUTF8(b.buf.String(), "\uFFFD") }
