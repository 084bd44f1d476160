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
	"herd/internal/agents"
	"herd/internal/mockapi"
)

// The two commits of a real agent's task: the first turn's greeting is
// misspelt, and the check's failure, typed back by herd, makes the mock
// call the shell tool again with the fix.
const (
	commitTypo = "printf 'helo\\n' > greeting.txt && git add greeting.txt && git -c user.name=agent -c user.email=agent@localhost commit -q -m 'Add a greeting'"
	commitFix  = "printf 'hello\\n' > greeting.txt && git add greeting.txt && git -c user.name=agent -c user.email=agent@localhost commit -q -m 'Spell the greeting right'"
)

// realTask is one real agent CLI as a replica of a task role.
type realTask struct {
	// command is the agent's argv: it runs shell commands unasked.
	command []string
	// env is the body of the role's env table (the mock's URL is %[1]s,
	// the agent's home %[2]s).
	env string
	// setup writes the agent's own config into home.
	setup func(t *testing.T, home, mockURL string)
	// startup answers what the agent asks when it starts in a folder it
	// has not seen, and returns once it is idle at its prompt.
	startup func(t *testing.T, e *env, name string)
}

// TestRealClaudeTask runs the real Claude Code (HERD_REAL_CLAUDE;
// scripts/real-agents.sh installs one) as a replica of a task role (see
// runRealTask).
func TestRealClaudeTask(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(claude, "--version").Output()
	t.Logf("claude: %s (%s)", strings.TrimSpace(string(version)), claude)
	runRealTask(t, realTask{
		command: []string{claude, "--allowedTools", "Bash", "--permission-mode", "default"},
		env:     `HOME = %[2]q, ANTHROPIC_BASE_URL = %[1]q, ANTHROPIC_API_KEY = "sk-ant-mock-0123456789abcdefghij", DISABLE_AUTOUPDATER = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_TELEMETRY = "1", TERM = "xterm-256color", LANG = "C.UTF-8"`,
		setup: func(t *testing.T, home, _ string) {
			mustWrite(t, filepath.Join(home, ".claude.json"), `{"hasCompletedOnboarding": true, "theme": "dark"}`)
		},
		startup: func(t *testing.T, e *env, name string) {
			answerStartup(t, e, name)
			e.waitFor(name+" idle at its prompt", 60*time.Second, func() bool {
				v, _ := e.session(name)
				return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
			})
		},
	})
}

// TestRealCodexTask is TestRealClaudeTask with the real Codex
// (HERD_REAL_CODEX), approvals and sandbox off; its folder's trust is
// answered at the pane.
func TestRealCodexTask(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(codex, "--version").Output()
	t.Logf("codex: %s (%s)", strings.TrimSpace(string(version)), codex)
	runRealTask(t, realTask{
		command: []string{codex, "--dangerously-bypass-approvals-and-sandbox"},
		env:     `HOME = %[2]q, MOCK_API_KEY = "mock", TERM = "xterm-256color", LANG = "C.UTF-8"`,
		setup: func(t *testing.T, home, url string) {
			if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(`model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, url))
		},
		startup: func(t *testing.T, e *env, name string) {
			const trustQ = "Trust this folder?"
			e.waitFor(name+" past its startup dialogs", 90*time.Second, func() bool {
				sc := e.capture(name)
				if strings.Contains(sc, trustQ) {
					e.chooseOption(name, trustQ, "Trust and continue")
					return false
				}
				// Idle as herd reads it (the hooks report once the folder
				// is trusted) and on the screen: a screen still drawing
				// is not the prompt.
				v, _ := e.session(name)
				return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle && agents.ClassifyScreen(herd.AgentCodex, sc).Activity == herd.ActivityIdle
			})
		},
	})
}

// TestRealGeminiTask is TestRealClaudeTask with the real Gemini CLI
// (HERD_REAL_GEMINI) in yolo mode, its workspaces trusted up front.
func TestRealGeminiTask(t *testing.T) {
	gemini := os.Getenv("HERD_REAL_GEMINI")
	if gemini == "" {
		t.Skip("HERD_REAL_GEMINI is not set (scripts/real-agents.sh sets it)")
	}
	version, _ := exec.Command(gemini, "--version").Output()
	t.Logf("gemini: %s (%s)", strings.TrimSpace(string(version)), gemini)
	runRealTask(t, realTask{
		command: []string{gemini, "-m", "gemini-2.5-flash", "--yolo"},
		env:     `HOME = %[2]q, GEMINI_API_KEY = "mock", GOOGLE_GEMINI_BASE_URL = %[1]q, GEMINI_CLI_TRUST_WORKSPACE = "true", TERM = "xterm-256color", LANG = "C.UTF-8"`,
		setup: func(t *testing.T, home, _ string) {
			if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}}`)
		},
		startup: func(t *testing.T, e *env, name string) {
			e.waitFor(name+" idle at its prompt", 90*time.Second, func() bool {
				v, _ := e.session(name)
				return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
			})
		},
	})
}

// runRealTask runs a real agent as the one replica of a task role: `herd
// task add` queues the work; herd relaunches the replica in the task's
// worktree (what the agent asks in a new folder answered as a person
// would), types the prompt, and the mock, asked for a tool, has the agent
// commit a misspelt greeting with its shell tool; the turn's end (from the
// agent's own hooks) with a commit runs the check, which fails: its
// output goes back to the same agent, whose next turn commits a fix; the
// check passes: review; `herd task approve` lands it on main, and the
// worktree and branch are gone.
func runRealTask(t *testing.T, a realTask) {
	hasTmux(t)
	mock, ln := startMock(t)
	mock.ToolCommands(commitTypo, commitFix)
	url := "http://" + ln.Addr().String()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	a.setup(t, home, url)
	repo := gitRepo(t)
	e := newEnv(t, fastRestart)
	e.start()
	const name = "worker-0"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of %s:\n%s\nmock records: %+v", name, e.capture(name), mock.Records())
		}
		e.endAgents()
	})
	// The check's failure names the mock's tool trigger: typed back into
	// the agent, it makes the mock ask for the fix.
	check := fmt.Sprintf(`["sh", "-c", "grep -qx hello greeting.txt || { echo '%s: greeting.txt must say hello'; exit 1; }"]`, mockapi.TriggerTool)
	command := make([]string, len(a.command))
	for i, arg := range a.command {
		command[i] = fmt.Sprintf("%q", arg)
	}
	roles := filepath.Join(root, "roles.toml")
	mustWrite(t, roles, fmt.Sprintf(`[[role]]
name = "worker"
command = [%s]
workdir = %q
tasks = true
check = %s
env = { %s }
`, strings.Join(command, ", "), repo, check, fmt.Sprintf(a.env, url, home)))
	e.must("apply", "-f", roles)
	e.waitState(name, herd.StateRunning, 60*time.Second)
	a.startup(t, e, name)

	id := strings.TrimSpace(e.must("task", "add", "worker", "--title", "greeting", mockapi.TriggerTool+": add a greeting file and commit it"))
	e.waitFor(name+" relaunched for the task", 60*time.Second, func() bool {
		for _, ev := range e.events("--session", name, "--kind", herd.EventRestarted) {
			if ev.Reason == "task" {
				return true
			}
		}
		return false
	})
	a.startup(t, e, name)
	task := e.waitTask(id, herd.TaskReview, 4*time.Minute)
	wt := filepath.Join(repo, ".herd", "worktrees", id)
	if task.Commits != 2 || task.Attempts != 1 || task.Worktree != wt {
		t.Errorf("[review] expected two commits in %s after one failure sent back, got %+v", wt, task)
	}
	if diff := e.must("task", "diff", id); !strings.Contains(diff, "+hello") || !strings.Contains(diff, "greeting.txt") {
		t.Errorf("[diff] expected greeting.txt's line, got:\n%s", diff)
	}
	e.must("task", "approve", id)
	e.waitTask(id, herd.TaskLanded, 2*time.Minute)
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
