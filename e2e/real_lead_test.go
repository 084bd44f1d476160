package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herd"
	"herd/internal/mockapi"
)

// leadTrigger starts the mock's scripted conversation.
const leadTrigger = "herd-lead"

// TestRealLeadAgent runs the real Claude Code (HERD_REAL_CLAUDE;
// scripts/real-agents.sh installs one) as a lead under the herd daemon: its
// role has mcp = true and manages = ["worker"], and the mock API, scripted,
// has it call herd's tools as a model would: list_sessions, send to each
// of two simulated workers, wait for them to be idle, read_output of one
// (first ToolSearch for them: Claude Code defers MCP tools by default).
// The mock must get each tool's result back (the workers listed, each send
// delivered, the wait reached, the output holding what the worker
// printed), and each call must be an mcp_call event of the lead.
func TestRealLeadAgent(t *testing.T) {
	claude := os.Getenv("HERD_REAL_CLAUDE")
	if claude == "" {
		t.Skip("HERD_REAL_CLAUDE is not set (scripts/real-agents.sh sets it)")
	}
	hasTmux(t)
	version, _ := exec.Command(claude, "--version").Output()
	t.Logf("claude: %s (%s)", strings.TrimSpace(string(version)), claude)

	ln, err := mockapi.Listen()
	if err != nil {
		t.Fatal(err)
	}
	mock := mockapi.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mock.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("mock api: %v", err)
		}
	})
	const text = "run the tests and report"
	mock.Script(leadTrigger, []mockapi.ToolCall{
		{Name: "mcp__herd__list_sessions", Input: map[string]any{"role": "worker"}},
		{Name: "mcp__herd__send", Input: map[string]any{"session": "worker-0", "text": text}},
		{Name: "mcp__herd__send", Input: map[string]any{"session": "worker-1", "text": text}},
		{Name: "mcp__herd__wait", Input: map[string]any{"role": "worker", "for": "idle", "timeout": "2m"}},
		{Name: "mcp__herd__read_output", Input: map[string]any{"session": "worker-1", "tail_lines": 20}},
	})

	// Made before the environment, removed after it: the agents write
	// into it until they are gone.
	root := t.TempDir()
	home, proj, work := filepath.Join(root, "home"), filepath.Join(root, "proj"), filepath.Join(root, "work")
	for _, d := range []string{home, proj, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Onboarding done (it would reach api.anthropic.com); the trust and
	// API-key dialogs are answered below.
	if err := os.WriteFile(filepath.Join(home, ".claude.json"), []byte(`{"hasCompletedOnboarding": true, "theme": "dark"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fastRestart)
	e.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen of lead-0:\n%s\nmock records: %+v", e.capture("lead-0"), mock.Records())
		}
		// The agents outlive the daemon by design: end them, and wait, so
		// nothing writes into root once it is removed.
		_ = exec.Command("tmux", "-L", e.tmuxSock, "kill-server").Run()
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
			pids := e.agentPIDs()
			if len(pids) == 0 {
				return
			}
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(100 * time.Millisecond) // polling interval
		}
	})
	e.must("hooks", "install", "--dir", proj)
	// The workers: working at once, idle (a Stop hook) 30s after start,
	// so the lead's wait most likely has something to wait for.
	roles := filepath.Join(root, "roles.toml")
	if err := os.WriteFile(roles, fmt.Appendf(nil, `[[role]]
name = "lead"
command = [%q, "--allowedTools", "mcp__herd", "--permission-mode", "default"]
workdir = %q
mcp = true
manages = ["worker"]
env = { HOME = %q, ANTHROPIC_BASE_URL = %q, ANTHROPIC_API_KEY = "sk-ant-mock-0123456789abcdefghij", DISABLE_AUTOUPDATER = "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_TELEMETRY = "1", TERM = "xterm-256color", LANG = "C.UTF-8" }

[[role]]
name = "worker"
replicas = 2
command = [%q, "sim", "--wait-input", "--interval", "15s", "--hooks", "PreToolUse:Bash,PreToolUse:Bash,Stop"]
workdir = %q
`, claude, proj, home, "http://"+ln.Addr().String(), bin, work), 0o600); err != nil {
		t.Fatal(err)
	}
	e.must("apply", "-f", roles)
	spawned := e.eventsOf("lead-0", herd.EventSpawned, 1)[0]
	if argv := fmt.Sprint(spawned.Data["argv"]); !strings.Contains(argv, "--mcp-config") {
		t.Fatalf("expected the lead launched with --mcp-config, got %s", argv)
	}

	answerStartup(t, e, "lead-0")
	e.waitFor("lead-0 idle at its prompt", 60*time.Second, func() bool {
		v, _ := e.session("lead-0")
		return v.State == herd.StateRunning && v.Activity == herd.ActivityIdle
	})
	for _, w := range []string{"worker-0", "worker-1"} {
		e.waitFor(w+" prompt", 30*time.Second, func() bool { return strings.Contains(e.try("logs", w), "waiting for your input") })
	}

	asked := time.Now()
	e.must("inject", "lead-0", leadTrigger+": give the workers their task and read what they say")
	// The prompt reaches the API with herd's tools (or the tool to wait
	// for them): side requests (a title) carry it without.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.ContainsFunc(mock.Records(), func(r mockapi.Record) bool { return r.Trigger == leadTrigger }) {
		if time.Now().After(deadline) {
			var offered [][]string
			for _, r := range mock.Records() {
				offered = append(offered, r.Tools)
			}
			t.Fatalf("expected the prompt at the API with herd's tools within 30s; the requests offered %v", offered)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	const calls = 5
	var last mockapi.Record
	e.waitFor("every tool result back at the API", 4*time.Minute, func() bool {
		for _, r := range mock.Records() {
			if r.Trigger == leadTrigger && !r.Tool && r.Status == 200 {
				last = r
				return true
			}
		}
		return false
	})
	t.Logf("prompt typed -> the last tool result at the API: %s", last.Time.Sub(asked).Round(10*time.Millisecond))

	// Each tool's result, by the id of the call it answers.
	names, results := map[string]string{}, map[string]mockapi.ToolResult{}
	var order []string
	for _, r := range mock.Records() {
		if r.ToolName == mockapi.WaitForMCP || r.ToolName == mockapi.ToolSearch {
			t.Logf("herd's tools not offered yet: %s called first (tools offered: %v)", r.ToolName, r.Tools)
			continue
		}
		if r.ToolID != "" && names[r.ToolID] == "" {
			names[r.ToolID] = r.ToolName
			order = append(order, r.ToolID)
		}
		for _, x := range r.Results {
			results[x.ToolUseID] = x
		}
	}
	if len(order) != calls {
		t.Fatalf("expected %d tool calls, got %d: %v", calls, len(order), names)
	}
	for i, id := range order {
		res, ok := results[id]
		t.Logf("tool %d %s -> %s", i+1, names[id], clip(res.Text, 600))
		if !ok || res.IsError {
			t.Errorf("[%s] expected a result that is no error, got %+v (present %v)", names[id], res, ok)
		}
	}
	res := func(i int) string { return results[order[i]].Text }
	for _, w := range []string{"worker-0", "worker-1"} {
		if !strings.Contains(res(0), `"name":"`+w+`"`) {
			t.Errorf("[list_sessions] expected %s listed, got %s", w, res(0))
		}
	}
	if strings.Contains(res(0), `"name":"lead-0"`) {
		t.Errorf("[list_sessions role=worker] expected the lead left out, got %s", res(0))
	}
	for i := 1; i <= 2; i++ {
		if !strings.Contains(res(i), `"delivered":1`) || !strings.Contains(res(i), `"delivered":true`) {
			t.Errorf("[send %d] expected one delivery, got %s", i, res(i))
		}
	}
	if !strings.Contains(res(3), `"reached":true`) {
		t.Errorf("[wait] expected the workers idle, got %s", res(3))
	}
	if !strings.Contains(res(4), "You said: "+text) {
		t.Errorf("[read_output] expected what worker-1 printed, got %s", res(4))
	}

	// Each call an mcp_call event naming the lead.
	var tools []string
	for _, ev := range e.events("--kind", herd.EventMCPCall) {
		if ev.Session != "lead-0" {
			t.Errorf("expected every mcp_call event of lead-0, got one of %q: %+v", ev.Session, ev)
		}
		tools = append(tools, fmt.Sprint(ev.Data["tool"]))
		t.Logf("event: %s %s %s %s %v", ev.Time.Format(time.TimeOnly), ev.Session, ev.Kind, ev.Reason, ev.Data)
	}
	for _, want := range []string{"list_sessions", "send", "send", "wait", "read_output"} {
		i := slices.Index(tools, want)
		if i < 0 {
			t.Errorf("expected an mcp_call event of %s, got %v", want, tools)
			continue
		}
		tools = slices.Delete(tools, i, i+1)
	}
	e.waitFor("lead-0 idle after its turn", 60*time.Second, func() bool {
		v, _ := e.session("lead-0")
		return v.Activity == herd.ActivityIdle
	})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
