package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd"
)

// envRawPost makes the test binary post to the daemon's socket
// (HERD_SOCKET) by hand, as any program an agent runs could: the route
// named, no body; it prints the status and the answer, and exits.
const envRawPost = "HERD_E2E_RAW_POST"

func rawPost(route string) {
	sock := os.Getenv(herd.EnvSocket)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}, Timeout: 30 * time.Second}
	res, err := c.Post("http://herd"+route, "application/json", strings.NewReader("{}"))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, _ := io.ReadAll(res.Body)
	fmt.Printf("%d %s\n", res.StatusCode, b)
	os.Exit(0)
}

// TestAgentsConfinedByDaemon: an agent whose role does not manage victim
// runs `herd stop victim-0`, `herd inject victim-0 ...`, a raw POST on
// the socket and herd mcp's send without HERD_SESSION from its shell: the daemon refuses each (the reason says
// what would allow it), victim-0 runs on untouched, and each refusal is
// an mcp_call event of the calling session. An agent whose role manages
// its target stops it, victim-0's hooks reach the daemon from inside its
// agent, and the user's CLI, outside every agent, still does everything.
func TestAgentsConfinedByDaemon(t *testing.T) {
	t.Parallel()
	// Incarnations in cgroups of their own where the host allows, and
	// told by their environment marker.
	t.Run("contained", func(t *testing.T) { testConfined(t, nil) })
	t.Run("marker", func(t *testing.T) { testConfined(t, []string{"HERD_CONTAINMENT=marker"}) })
}

func testConfined(t *testing.T, extra []string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// Each script writes what its calls answered, then waits as an agent
	// would.
	// Each waits for the go the test gives once it runs: a call made
	// before its launch is confirmed is one herd cannot place yet.
	rogue := `
while [ ! -e "$OUT/go" ]; do sleep 0.1; done
"$HERD_BIN" stop victim-0 >"$OUT/stop.out" 2>&1; echo $? >"$OUT/stop.code"
"$HERD_BIN" inject victim-0 hello >"$OUT/inject.out" 2>&1; echo $? >"$OUT/inject.code"
` + envRawPost + `=/v1/sessions/victim-0/stop "$E2E_BIN" >"$OUT/raw.out" 2>&1
(printf '%s\n' "$MCP_INIT" "$MCP_READY" "$MCP_SEND"; sleep 5) | env -u HERD_SESSION "$HERD_BIN" mcp >"$OUT/mcp.out" 2>&1
"$HERD_BIN" get sessions -o name >"$OUT/get.out" 2>&1; echo $? >"$OUT/get.code"
touch "$OUT/done"
exec sleep 600
`
	boss := `
while [ ! -e "$OUT/go" ]; do sleep 0.1; done
"$HERD_BIN" stop minion-0 >"$OUT/boss.out" 2>&1; echo $? >"$OUT/boss.code"
touch "$OUT/boss.done"
exec sleep 600
`
	sim := fmt.Sprintf(`%q, "sim", "--interval", "300ms", "--quiet", "--hooks", "SessionStart,PreToolUse:Bash,PermissionRequest"`, bin)
	// herd mcp without HERD_SESSION: its own guard takes it for a
	// person's client; the daemon knows better.
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`
	mcpReady := `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	mcpSend := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"send","arguments":{"session":"victim-0","text":"hello"}}}`
	env := fmt.Sprintf(`env = { HERD_BIN = %q, E2E_BIN = %q, OUT = %q, MCP_INIT = %q, MCP_READY = %q, MCP_SEND = %q }`,
		bin, self, out, mcpInit, mcpReady, mcpSend)
	e := newEnv(t, fastRestart+fmt.Sprintf(`
[mcp]
verbs = ["stop"]

[[role]]
name = "victim"
runtime = "exec"
command = [%[1]s]

[[role]]
name = "minion"
runtime = "exec"
command = [%[1]s]

[[role]]
name = "rogue"
runtime = "exec"
command = ["sh", "-c", %[2]q]
%[4]s

[[role]]
name = "boss"
runtime = "exec"
command = ["sh", "-c", %[3]q]
manages = ["minion"]
%[4]s
`, sim, rogue, boss, env))
	e.extraEnv = extra
	e.start()
	if extra != nil {
		e.waitFor("containment by marker", 10*time.Second, func() bool {
			b, _ := os.ReadFile(e.logPath)
			return strings.Contains(string(b), "containment by environment marker")
		})
	}
	victim := e.waitState("victim-0", herd.StateRunning, 20*time.Second)
	e.waitState("minion-0", herd.StateRunning, 20*time.Second)
	e.waitState("rogue-0", herd.StateRunning, 20*time.Second)
	e.waitState("boss-0", herd.StateRunning, 20*time.Second)
	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return strings.TrimSpace(string(b))
	}
	done := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(out, name)); return err == nil }
	}
	e.waitFor("the rogue agent's calls", 60*time.Second, done("done"))
	e.waitFor("the boss agent's call", 60*time.Second, done("boss.done"))

	why := `rogue-0 may not stop session victim-0 (role victim): role rogue manages [] (add "victim" to its manages key)`
	if code, o := read("stop.code"), read("stop.out"); code == "0" || !strings.Contains(o, why) {
		t.Errorf("[herd stop from inside an agent] expected refused with %q, got exit %s: %s", why, code, o)
	}
	if code, o := read("inject.code"), read("inject.out"); code == "0" || !strings.Contains(o, "rogue-0 may not send session victim-0") {
		t.Errorf("[herd inject from inside an agent] expected refused, got exit %s: %s", code, o)
	}
	if o := read("raw.out"); !strings.HasPrefix(o, "403 ") || !strings.Contains(o, "rogue-0 may not stop session victim-0 (role victim)") {
		t.Errorf("[raw POST from inside an agent] expected 403 with %q, got %s", why, o)
	}
	if o := read("mcp.out"); !strings.Contains(o, `"id":2`) || !strings.Contains(o, "rogue-0 may not send session victim-0") {
		t.Errorf("[herd mcp without HERD_SESSION inside an agent] expected send refused by the daemon, got %s", o)
	}
	if code, o := read("get.code"), read("get.out"); code != "0" || !strings.Contains(o, "victim-0") {
		t.Errorf("[herd get from inside an agent] expected the listing, got exit %s: %s", code, o)
	}

	// The victim runs on, the same incarnation, never stopped.
	if v, _ := e.session("victim-0"); v.State != herd.StateRunning || v.Incarnation != victim.Incarnation {
		t.Errorf("expected victim-0 untouched (running, incarnation %s), got %s, %s", victim.Incarnation, v.State, v.Incarnation)
	}
	if n := count(e.events("--session", "victim-0"), herd.EventStopped); n != 0 {
		t.Errorf("expected no stopped event of victim-0, got %d", n)
	}
	// Each refusal is an event of the calling session, with the reason.
	var refused []string
	for _, ev := range e.events("--session", "rogue-0", "--kind", herd.EventMCPCall) {
		if ev.Reason == "mcp_refused" && strings.Contains(ev.Message, "victim-0") {
			refused = append(refused, fmt.Sprint(ev.Data["tool"]))
		}
	}
	if strings.Join(refused, ",") != "stop,send,stop,send" {
		t.Errorf("expected the refusals stop, send, stop, send as mcp_call events of rogue-0, got %v", refused)
	}

	// The hooks of victim-0's agent reach the daemon from inside it.
	e.waitFor("victim-0 waiting (its hooks)", 20*time.Second, func() bool {
		v, _ := e.session("victim-0")
		return v.Activity == herd.ActivityWaiting
	})

	// An agent whose role manages the target is allowed.
	if code, o := read("boss.code"), read("boss.out"); code != "0" {
		t.Errorf("[boss stops a managed session] expected exit 0, got %s: %s", code, o)
	}
	e.waitState("minion-0", herd.StateStopped, 20*time.Second)

	// The user, outside every agent, does everything.
	e.must("stop", "victim-0")
	e.waitState("victim-0", herd.StateStopped, 20*time.Second)
	e.must("stop", "rogue-0")
}
