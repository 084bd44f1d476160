package agents

import (
	"bytes"
	"context"
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

// TestRealCodex runs the real Codex CLI (`codex exec --json`) against the
// mock's Responses API. It runs only when HERD_REAL_CODEX names a codex
// command; with HERD_CAPTURE_FIXTURES=1 it rewrites
// testdata/codex/<version>/exec-*.jsonl.
func TestRealCodex(t *testing.T) {
	codex := os.Getenv("HERD_REAL_CODEX")
	if codex == "" {
		t.Skip("HERD_REAL_CODEX is not set (scripts/real-agents.sh sets it)")
	}
	root := t.TempDir()
	home, proj := filepath.Join(root, "home"), filepath.Join(root, "proj")
	for _, d := range []string{filepath.Join(home, ".codex"), proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
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
	writeFile(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(`model = "gpt-mock"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "http://%s/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, ln.Addr()))
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "MOCK_API_KEY=mock", "LANG=C.UTF-8"}
	version := codexVersion(t, codex, env)
	t.Logf("codex %s", version)

	resolved := Resolve(codex, proj)
	if k := Infer([]string{codex}, resolved); k != herd.AgentCodex {
		t.Errorf("Infer(%s -> %s) = %q, want codex", codex, resolved, k)
	}
	scrub := strings.NewReplacer(home, "/home/user", proj, "/home/user/proj", ln.Addr().String(), "127.0.0.1:8787")
	files := map[string][]byte{}
	runs := []struct {
		file, prompt string
		extra        []string
		want         herd.Activity
		reason       string
	}{
		{"exec-ok.jsonl", "say hello", nil, herd.ActivityIdle, ""},
		{"exec-tool.jsonl", "run the " + mockapi.TriggerTool, []string{"-s", "workspace-write"}, herd.ActivityIdle, ""},
		{"exec-rate-limit.jsonl", mockapi.TriggerRateLimit, nil, herd.ActivityBlocked, ReasonRateLimited},
		{"exec-overloaded.jsonl", mockapi.TriggerOverloaded, nil, herd.ActivityBlocked, ReasonAPIError},
	}
	for _, r := range runs {
		rctx, rcancel := context.WithTimeout(context.Background(), 120*time.Second)
		args := append([]string{"exec", "--json", "--skip-git-repo-check"}, r.extra...)
		cmd := exec.CommandContext(rctx, codex, append(args, r.prompt)...)
		cmd.Dir, cmd.Env = proj, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, _ := cmd.Output()
		rcancel()
		if len(out) == 0 {
			t.Errorf("%s: no output: %s", r.file, stderr.String())
			continue
		}
		files[r.file] = []byte(scrub.Replace(string(out)))
		var st State
		reconnects := 0
		for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			s := ParseLine(herd.AgentCodex, l, time.Now())
			if s.Event == "error" {
				reconnects++
				if s.Progress {
					t.Errorf("%s: an error line counted as progress: %s", r.file, l)
				}
			}
			st = Apply(st, s)
		}
		if st.Activity != r.want || st.Reason != r.reason || st.AgentSessionID == "" {
			t.Errorf("%s: ended %q/%q id %q, want %q/%q:\n%s", r.file, st.Activity, st.Reason, st.AgentSessionID, r.want, r.reason, out)
		}
		if r.reason == ReasonRateLimited && st.ResetAt.IsZero() {
			t.Errorf("%s: no reset time read from %q", r.file, st.Error)
		}
		if r.file == "exec-overloaded.jsonl" && reconnects == 0 {
			t.Errorf("%s: no reconnect line", r.file)
		}
		if r.file == "exec-tool.jsonl" {
			if _, err := os.Stat(filepath.Join(proj, "herd-tool-ran")); err != nil {
				t.Errorf("the tool did not run: %v", err)
			}
		}
	}
	if os.Getenv("HERD_CAPTURE_FIXTURES") == "1" {
		dir := filepath.Join("testdata", "codex", version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("wrote %d fixtures to %s", len(files), dir)
	}
}

// codexVersion is the version `codex --version` prints ("0.169.0").
func codexVersion(t *testing.T, codex string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "--version")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v", codex, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		t.Fatalf("%s --version: empty", codex)
	}
	return f[len(f)-1]
}
