package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd"
)

// TestMCPSession drives `herd mcp` over stdio with the SDK's client, as an
// agent of role lead (which manages worker) would: list, send, wait, read;
// a send outside its reach and a stop not in [mcp] verbs are refused with
// a clear error and an event.
func TestMCPSession(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	sim := fmt.Sprintf("%q, \"sim\", \"--wait-input\", \"--interval\", \"200ms\"", bin)
	e := newEnv(t, fastRestart+fmt.Sprintf(`
[[role]]
name = "lead"
command = [%[1]s]
manages = ["worker"]

[[role]]
name = "worker"
command = [%[1]s]

[[role]]
name = "review"
command = [%[1]s]
`, sim))
	e.start()
	for _, n := range []string{"lead-0", "worker-0", "review-0"} {
		e.waitState(n, herd.StateRunning, 10*time.Second)
	}
	e.waitFor("worker-0 prompt", 10*time.Second, func() bool { return strings.Contains(e.try("logs", "worker-0"), "waiting for your input") })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(e.environ(), herd.EnvSession+"=lead-0")
	client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(tool string, args map[string]any) (map[string]any, string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		text := res.Content[0].(*sdk.TextContent).Text
		var out map[string]any
		if !res.IsError {
			if err := json.Unmarshal([]byte(text), &out); err != nil {
				t.Fatalf("%s: %v: %s", tool, err, text)
			}
		}
		return out, text, res.IsError
	}

	tools, err := cs.ListTools(ctx, nil)
	// The session tools and the task tools (submit_task, list_tasks,
	// describe_task, task_done, task_blocked).
	if err != nil || len(tools.Tools) != 15 {
		t.Fatalf("expected the 15 tools, got %v %v", tools, err)
	}
	_, text, isErr := call("list_sessions", map[string]any{"state": "running"})
	for _, n := range []string{"lead-0", "worker-0", "review-0"} {
		if isErr || !strings.Contains(text, `"name":"`+n+`"`) {
			t.Errorf("[list_sessions] expected %s listed, got %s", n, text)
		}
	}
	out, text, isErr := call("send", map[string]any{"role": "worker", "text": "hello from lead"})
	if isErr || out["delivered"] != float64(1) {
		t.Fatalf("[send] expected one delivery, got %s", text)
	}
	out, text, isErr = call("wait", map[string]any{"sessions": []string{"worker-0"}, "for": "running", "timeout": "10s"})
	if isErr || out["reached"] != true {
		t.Errorf("[wait] expected worker-0 reached running, got %s", text)
	}
	var mark float64
	e.waitFor("the typed text on worker-0's screen", 10*time.Second, func() bool {
		out, _, isErr := call("read_output", map[string]any{"session": "worker-0", "tail_lines": 20})
		mark, _ = out["mark"].(float64)
		return !isErr && strings.Contains(fmt.Sprint(out["text"]), "You said: hello from lead")
	})
	if out, text, _ := call("read_output", map[string]any{"session": "worker-0", "since_mark": mark}); strings.Contains(fmt.Sprint(out["text"]), "hello from lead") {
		t.Errorf("[read_output since_mark] expected only what came after the mark, got %s", text)
	}

	screen, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "herd://sessions/worker-0/screen"})
	if err != nil || !strings.Contains(screen.Contents[0].Text, "You said: hello from lead") {
		t.Errorf("[screen resource] expected worker-0's screen, got %+v %v", screen, err)
	}
	log, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "herd://events"})
	if err != nil || !strings.Contains(log.Contents[0].Text, `"kind":"spawned"`) {
		t.Errorf("[events resource] expected the event log, got %+v %v", log, err)
	}

	_, text, isErr = call("send", map[string]any{"session": "review-0", "text": "not yours"})
	if !isErr || !strings.Contains(text, "role lead manages [worker]") || !strings.Contains(text, `add "review" to its manages key`) {
		t.Errorf("[send outside manages] expected a refusal saying what to do, got %q", text)
	}
	_, text, isErr = call("send", map[string]any{"session": "lead-0", "text": "me"})
	if !isErr || !strings.Contains(text, "calling session itself") {
		t.Errorf("[send to itself] expected a refusal, got %q", text)
	}
	_, text, isErr = call("stop", map[string]any{"session": "worker-0"})
	if !isErr || !strings.Contains(text, "[mcp] verbs does not list it") {
		t.Errorf("[stop] expected a refusal naming [mcp] verbs, got %q", text)
	}
	if v, _ := e.session("worker-0"); v.State != herd.StateRunning {
		t.Errorf("[stop refused] expected worker-0 still running, got %s", v.State)
	}

	evs := e.events("--kind", herd.EventMCPCall, "--session", "lead-0")
	refused, sent := 0, 0
	for _, ev := range evs {
		if ev.Reason == "mcp_refused" {
			refused++
		}
		if ev.Data["tool"] == "send" && ev.Reason == "mcp" {
			sent++
		}
	}
	if refused != 3 || sent != 1 || len(evs) < 8 {
		t.Errorf("expected every call an mcp_call event of lead-0 (3 refused, 1 send), got %d refused, %d sent of %d: %+v", refused, sent, len(evs), evs)
	}
}

// TestMCPRoleKey: a role with mcp = true gets herd's MCP server at launch
// without a file in its workdir: a Claude Code agent gets --mcp-config
// naming a file in the state dir, and the server that file describes
// answers as the session itself.
func TestMCPRoleKey(t *testing.T) {
	t.Parallel()
	hasTmux(t)
	fakes := t.TempDir()
	work := t.TempDir()
	argvFile := filepath.Join(t.TempDir(), "argv")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argvFile + "\nexec sleep 300\n"
	if err := os.WriteFile(filepath.Join(fakes, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, fastRestart+fmt.Sprintf(`
[[role]]
name = "lead"
command = [%q]
workdir = %q
manages = ["lead"]
mcp = true
`, filepath.Join(fakes, "claude"), work))
	e.start()
	e.waitState("lead-0", herd.StateRunning, 10*time.Second)
	var argv []string
	e.waitFor("the agent's argv", 10*time.Second, func() bool {
		b, err := os.ReadFile(argvFile)
		argv = strings.Split(strings.TrimSpace(string(b)), "\n")
		return err == nil && len(argv) > 1
	})
	cfgPath := filepath.Join(e.dir, "mcp", "lead-0.json")
	if len(argv) < 2 || argv[0] != "--mcp-config" || argv[1] != cfgPath {
		t.Fatalf("expected --mcp-config %s first, got %q", cfgPath, argv)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("expected nothing written into the workdir, found %v", entries)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(cfgPath)
	if err != nil || json.Unmarshal(b, &cfg) != nil || cfg.MCPServers["herd"].Command == "" {
		t.Fatalf("expected an mcpServers.herd entry in %s, got %s %v", cfgPath, b, err)
	}
	srv := cfg.MCPServers["herd"]
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "HERD_NO_AUTOSTART=1"}
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "list_sessions", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `"name":"lead-0"`) {
		t.Fatalf("expected the configured server to list lead-0, got %+v %v", res, err)
	}
	evs := e.events("--kind", herd.EventMCPCall, "--session", "lead-0")
	if len(evs) != 1 || evs[0].Data["tool"] != "list_sessions" || evs[0].Data["by"] != "lead-0" {
		t.Errorf("expected the call recorded as lead-0's, by lead-0, got %+v", evs)
	}
}
