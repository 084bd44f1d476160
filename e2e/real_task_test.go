package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/mockapi"
)

// taskTrigger starts the mock's scripted conversation of the task.
const taskTrigger = "herd-task"

// TestRealClaudeTask runs the real Claude Code (HERD_REAL_CLAUDE;
// scripts/real-agents.sh installs one) as a replica of a task role: `herd
// task add` queues the work; herd relaunches the replica in the task's
// worktree (its new folder's trust dialog answered as a person would), types
// the prompt, and the mock, scripted, has the agent commit a file with its
// Bash tool; the turn's end (from Claude Code's own hooks) with a commit
// runs the check, which fails: its output goes back to the same agent,
// whose next turn commits a fix; the check passes: review; `herd task
// approve` lands it on main, and the worktree and branch are gone.
func TestRealClaudeTask(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	version, _ := exec.Command(claude, "--version").Output()
	t.Logf("claude: %s (%s)", strings.TrimSpace(string(version)), claude)

	mock, ln := startMock(t)
	// The first turn commits a greeting the check refuses (misspelt);
	// the check's failure, typed back by herd, is the second turn's
	// prompt, whose call fixes it.
	mock.ScriptTurns(taskTrigger, []mockapi.ToolCall{{Name: "Bash", Input: map[string]any{
		"command":     "printf 'helo\\n' > greeting.txt && git add greeting.txt && git -c user.name=agent -c user.email=agent@localhost commit -q -m 'Add a greeting'",
		"description": "Add a greeting and commit it",
	}}, {Name: "Bash", Input: map[string]any{
		"command":     "printf 'hello\\n' > greeting.txt && git add greeting.txt && git -c user.name=agent -c user.email=agent@localhost commit -q -m 'Spell the greeting right'",
		"description": "Fix the greeting and commit it",
	}}})

	root := t.TempDir()
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding": true, "theme": "dark"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of worker-0:\n%s\nmock records: %+v", e.capture("worker-0"), mock.Records())
		}
		e.endAgents()
	})
	roles := filepath.Join(root, "roles.toml")
	if err := os.WriteFile(roles, fmt.Appendf(nil, `[[role]]
name = "worker"
command = [%q, "--allowedTools", "Bash", "--permission-mode", "default"]
workdir = %q
tasks = true
check = ["grep", "-qx", "hello", "greeting.txt"]
env = { HOME = %q, ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-mock-0123456789abcdefghij", DISABLE_AUTOUPDATER = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_TELEMETRY = "1", TERM = "xterm-256color", LANG = "C.UTF-8" }
`, claude, repo, home, "http://"+ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	e.waitState("worker-0", herd.StateRunning, 60*time.Second)
	answerStartup(t, e, "worker-0")
	e.waitFor("worker-0 idle at its prompt", 60*time.Second, func() bool {
		v, _ := e.session("worker-0")
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})

	id := strings.TrimSpace(e.must("task", "add", "worker", "--title", "greeting", taskTrigger+": add a greeting file and commit it"))
	// Relaunched in the task's worktree: a folder Claude Code has not
	// seen asks for trust again, answered as a person would.
	e.waitFor("worker-0 relaunched for the task", 60*time.Second, func() bool {
		for _, ev := range e.events("--session", "worker-0", "--kind", herd.EventRestarted) {
			if ev.Reason == "task" {
				return true
			}
		}
		return false
	})
	answerStartup(t, e, "worker-0")
	task := e.waitTask(id, herd.TaskReview, 4*time.Minute)
	wt := filepath.Join(repo, ".herd", "worktrees", id)
	if task.Commits != 2 || task.Attempts != 1 || task.Worktree != wt {
		t.Errorf("[review] expected two commits in %s after one failure sent back, got %+v", wt, task)
	}
	if diff := e.must("task", "diff", id); !strings.Contains(diff, "+hello") || !strings.Contains(diff, "greeting.txt") {
		t.Errorf("[diff] expected greeting.txt's line, got:\n%s", diff)
	}
	e.must("task", "approve", id)
	task = e.waitTask(id, herd.TaskLanded, 2*time.Minute)
	if b, err := os.ReadFile(filepath.Join(repo, "greeting.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("[landed] expected greeting.txt on main in the checkout, got %q (%v)", b, err)
	}
	// Removed once the landing is recorded (the task is landed first).
	e.waitFor("the worktree removed", 20*time.Second, func() bool {
		_, err := os.Stat(wt)
		return os.IsNotExist(err)
	})
	for _, ev := range e.events() {
		if ev.Data["task"] == id {
			t.Logf("event: %s %s %s %s %s", ev.Time.Format(time.TimeOnly), ev.Session, ev.Kind, ev.Reason, clip(ev.Message, 200))
		}
	}
}
