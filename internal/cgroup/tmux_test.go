package cgroup

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/testenv"
)

// tmuxCmd runs tmux on a private socket.
func tmuxCmd(ctx context.Context, socket string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-L", socket}, args...)...)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, envMode+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	return cmd
}

func TestTmuxPaneThroughExecIn(t *testing.T) {
	// The tmux runtime does not fork the agent itself: the pane runs the
	// launch wrapper, which enters the cgroup and execs the agent.
	if _, err := exec.LookPath("tmux"); err != nil {
		testenv.Require(t, "tmux", err.Error(), testenv.InstallTmux)
	}
	cs := containments(t)
	c, ok := cs[ModeCgroup]
	if !ok {
		testenv.Require(t, "cgroup v2", "no writable cgroup here", testenv.InstallCgroup)
	}
	boot := bootID(t)
	fsys := proc.Real()
	inc := "inc-tmux"
	cleanupMarked(t, boot, inc)
	socket := fmt.Sprintf("herd-cgtest-%d", os.Getpid())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tmuxCmd(ctx, socket, "kill-server").Run()
	})

	l, err := c.Prepare(inc, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	exe, _ := os.Executable()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	out, err := tmuxCmd(ctx, socket, "new-session", "-d", "-s", "w-0",
		"-e", herd.EnvIncarnation+"="+inc, "-e", envMode+"=execin",
		"--", exe, l.CgroupPath, "sh", "-c", treeScript).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	// A session of somebody else's keeps the server up (tmux exits with
	// its last session) and must not be touched.
	if out, err := tmuxCmd(ctx, socket, "new-session", "-d", "-s", "other", "--", "sleep", "1000").CombinedOutput(); err != nil {
		t.Fatalf("tmux new-session other: %v: %s", err, out)
	}
	out, err = tmuxCmd(ctx, socket, "display-message", "-p", "#{pid} #{socket_path}").Output()
	if err != nil {
		t.Fatalf("server pid: %v", err)
	}
	pidText, socketPath, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	// Cleanups run last-registered first: the server is killed here,
	// before its socket goes (with the socket gone, kill-server could no
	// longer reach it and the server would outlive the test).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tmuxCmd(ctx, socket, "kill-server").Run()
		_ = os.Remove(socketPath)
	})
	serverPID, _ := strconv.Atoi(pidText)
	serverID, err := fsys.Identify(serverPID, boot)
	if err != nil {
		t.Fatalf("identify the tmux server: %v", err)
	}

	g, err := c.cg.Open(inc)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the tree inside the cgroup", 15*time.Second, func() bool {
		return treeUp(boot, inc) && groupHolds(g, treeSize)
	})
	rep, err := c.Stop(t.Context(), inc, time.Second)
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("tmux pane in a cgroup: %d processes stopped in %v", treeSize, rep.Took)
	if left, _ := Marked(fsys, boot, inc); len(left) != 0 || rep.Swept != 0 {
		t.Errorf("expected nothing left and nothing outside the cgroup, left %d swept %d", len(left), rep.Swept)
	}
	if got := fsys.Check(serverID, boot); got != herd.Alive {
		t.Errorf("expected the tmux server outside the cgroup and alive, got %s", got)
	}
	out, err = tmuxCmd(t.Context(), socket, "list-panes", "-a", "-F", "#{session_name} #{pane_dead}").Output()
	if err != nil || strings.TrimSpace(string(out)) != "other 0" {
		t.Errorf("expected only the other session left, alive, got %q (%v)", out, err)
	}
}
