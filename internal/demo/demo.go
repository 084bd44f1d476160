// Package demo runs herd's self-contained demonstration: a private daemon supervising simulated agents.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/daemon"
	"herd/internal/runtime/tmux"
	"herd/internal/store/sqlite"
)

// Options configure a demo run.
type Options struct {
	// Duration of the live table.
	Duration time.Duration
	// Runtime forces "tmux" or "exec"; empty picks tmux when installed.
	Runtime string
	// Keep leaves the state directory behind for inspection.
	Keep bool
	// Out receives the table and the summary.
	Out io.Writer
	// Version is reported by the demo's daemon.
	Version string
	// Render draws the live table in place (a terminal); else it is printed
	// every few seconds.
	Render bool
}

// Run starts a private daemon in a temporary state directory, declares four
// simulated agents (healthy, crash-looping, stalling, waiting for input),
// shows a live table, then a summary of what herd did, and cleans up all
// it started.
func Run(ctx context.Context, o Options) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	dir, err := os.MkdirTemp("", "herd-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if !o.Keep {
		defer os.RemoveAll(dir)
	}
	runtime := o.Runtime
	if runtime == "" {
		runtime = herd.RuntimeExec
		if _, err := exec.LookPath("tmux"); err == nil {
			runtime = herd.RuntimeTmux
		}
	}
	switch runtime {
	case herd.RuntimeTmux:
		fmt.Fprintf(o.Out, "herd demo: tmux is installed, so agents run in tmux panes (private server -L %s)\n", socketName())
	case herd.RuntimeExec:
		fmt.Fprintln(o.Out, "herd demo: agents run as child processes (exec runtime; install tmux to see them in panes)")
	default:
		return fmt.Errorf("demo: unknown runtime %q", runtime)
	}
	fmt.Fprintf(o.Out, "state dir %s; the daemon log is %s\n\n", dir, filepath.Join(dir, "daemon.log"))

	cfg := demoConfig()
	logFile, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer logFile.Close()
	ln, release, err := daemon.Listen(dir)
	if err != nil {
		return err
	}
	defer release()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	d, err := daemon.New(daemon.Options{
		StateDir: dir, Config: cfg, Store: st, Version: o.Version, StopGrace: 2 * time.Second,
		CaptureCommand: daemon.CaptureCommand(), EnterCommand: daemon.EnterCommand(),
		Logger: slog.New(slog.NewTextHandler(logFile, nil)),
	})
	if err != nil {
		return err
	}
	runCtx, stopDaemon := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, ln) }()
	defer func() {
		stopDaemon()
		<-done
		if runtime == herd.RuntimeTmux {
			c := &tmux.Client{Binary: cfg.Tmux.Binary, Socket: cfg.Tmux.Socket, Timeout: 5 * time.Second}
			c.KillServer(context.Background())
		}
	}()

	c := api.NewClient(daemon.SocketPath(dir))
	roles := demoRoles(self, dir, runtime)
	if err := c.Do(ctx, http.MethodPost, "/v1/roles", nil, roles, nil); err != nil {
		return fmt.Errorf("demo: declare roles: %w", err)
	}
	fmt.Fprintln(o.Out, "declared roles:")
	for _, r := range roles {
		fmt.Fprintf(o.Out, "  %-10s %s\n", r.Name, describeRole(r.Name))
	}
	fmt.Fprintln(o.Out)

	watchErr := live(ctx, c, o)
	// Clean up: every role deleted through the daemon's stop path.
	cleanCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var views []api.SessionView
	_ = c.Do(cleanCtx, http.MethodGet, "/v1/sessions", nil, nil, &views)
	var events []herd.Event
	_ = c.Do(cleanCtx, http.MethodGet, "/v1/events", nil, nil, &events)
	fmt.Fprint(o.Out, "\n"+Summary(views, events))
	for _, r := range roles {
		if err := c.Do(cleanCtx, http.MethodDelete, "/v1/roles/"+r.Name, nil, nil, nil); err != nil {
			fmt.Fprintf(o.Out, "cleanup: delete role %s: %v\n", r.Name, err)
		}
	}
	fmt.Fprintln(o.Out, "cleaned up: every agent stopped, the demo's daemon and tmux server shut down.")
	if o.Keep {
		fmt.Fprintf(o.Out, "state kept in %s\n", dir)
	}
	if errors.Is(watchErr, context.Canceled) {
		return nil
	}
	return watchErr
}

func socketName() string { return fmt.Sprintf("herd-demo-%d", os.Getpid()) }

func demoConfig() *config.Config {
	cfg := config.Default()
	cfg.Tmux.Socket = socketName()
	cfg.Probe.Interval = 500 * time.Millisecond
	cfg.Restart = herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ResetAfter: time.Minute, MaxRestarts: 3}
	cfg.Watchdog.StallAfter = 6 * time.Second
	cfg.Watchdog.StallRepeat = 6 * time.Second
	cfg.Watchdog.LivenessTimeout = 20 * time.Second
	cfg.Escalation.WaitingAfter = 10 * time.Second
	cfg.Escalation.UnknownAfter = 30 * time.Second
	return cfg
}

func demoRoles(self, dir, runtime string) []herd.Role {
	sim := func(args ...string) []string { return append([]string{self, "sim"}, args...) }
	role := func(name string, argv []string) herd.Role {
		return herd.Role{
			Name: name, Replicas: 1, Command: argv, Workdir: dir, Runtime: runtime, Agent: herd.AgentClaude,
			AgentProcess: filepath.Base(self),
			Restart:      herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ResetAfter: time.Minute, MaxRestarts: 3},
		}
	}
	return []herd.Role{
		role("healthy", sim("--interval", "1s", "--hooks", "SessionStart,UserPromptSubmit,PreToolUse:Bash,PostToolUse:Bash,PreToolUse:Edit,PostToolUse:Edit,Stop")),
		role("crashloop", sim("--interval", "300ms", "--signal", "SEGV", "--signal-after", "2s")),
		role("staller", sim("--interval", "500ms", "--silent-after", "3s")),
		role("waiter", sim("--interval", "700ms", "--quiet", "--hooks", "SessionStart,UserPromptSubmit,PreToolUse:Bash,PostToolUse:Bash,PermissionRequest")),
	}
}

func describeRole(name string) string {
	switch name {
	case "healthy":
		return "streams output and works through tool calls"
	case "crashloop":
		return "segfaults 2s after each start: crash-loop backoff, then failed"
	case "staller":
		return "goes silent after 3s while staying alive: a stall"
	case "waiter":
		return "asks for permission and waits for a person"
	}
	return ""
}

// live shows the session table until the duration ends or ctx is done.
func live(ctx context.Context, c *api.Client, o Options) error {
	end := time.Now().Add(o.Duration)
	lastPrint := time.Time{}
	for time.Now().Before(end) {
		var views []api.SessionView
		if err := c.Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
			return err
		}
		left := time.Until(end).Round(time.Second)
		switch {
		case o.Render:
			fmt.Fprintf(o.Out, "\033[H\033[2J%s — %s left (Ctrl-C ends the demo early)\n\n%s", time.Now().Format("15:04:05"), left, Table(views))
		case len(views) > 0 && time.Since(lastPrint) >= 5*time.Second:
			fmt.Fprintf(o.Out, "--- %s (%s left)\n%s", time.Now().Format("15:04:05"), left, Table(views))
			lastPrint = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// Table renders sessions the way `herd get sessions` does, compactly.
func Table(views []api.SessionView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-9s %-8s %-9s %-8s %-16s %s\n", "NAME", "STATE", "PROCESS", "ACTIVITY", "RESTARTS", "BACKOFF", "LAST-EXIT")
	now := time.Now()
	for _, v := range views {
		backoff := "-"
		if v.BackoffUntil != nil {
			backoff = "in " + v.BackoffUntil.Sub(now).Round(100*time.Millisecond).String()
		}
		state := string(v.State)
		if v.Escalated {
			state += "!"
		}
		fmt.Fprintf(&b, "%-12s %-9s %-8s %-9s %-8d %-16s %s\n", v.Name, state, v.Process, v.Activity, v.Restarts, backoff, exitText(v.Exit))
	}
	return b.String()
}

func exitText(e *herd.Exit) string {
	switch {
	case e == nil:
		return "-"
	case e.Signal != nil:
		return fmt.Sprintf("signal %d", *e.Signal)
	case e.Code != nil:
		return fmt.Sprintf("code %d", *e.Code)
	}
	return e.Reason
}

// Summary tells what herd did, per session, from the event log.
func Summary(views []api.SessionView, events []herd.Event) string {
	var b strings.Builder
	b.WriteString("What herd did:\n")
	per := map[string]map[string]int{}
	var delays = map[string][]string{}
	for _, e := range events {
		if per[e.Session] == nil {
			per[e.Session] = map[string]int{}
		}
		per[e.Session][e.Kind]++
		if e.Kind == herd.EventBackoff {
			if d, ok := e.Data["delay"].(string); ok {
				delays[e.Session] = append(delays[e.Session], d)
			}
		}
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
	for _, v := range views {
		k := per[v.Name]
		fmt.Fprintf(&b, "  %-12s now %s", v.Name, v.State)
		var parts []string
		if n := k[herd.EventSpawned] + k[herd.EventRestarted]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d launch(es)", n))
		}
		if n := k[herd.EventCrashed]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d crash(es) (last: %s)", n, exitText(v.Exit)))
		}
		if len(delays[v.Name]) > 0 {
			parts = append(parts, "backoff "+strings.Join(delays[v.Name], ", "))
		}
		if k[herd.EventFailed] > 0 {
			parts = append(parts, "failed: restart budget spent, left for a person")
		}
		if n := k[herd.EventStalled]; n > 0 {
			parts = append(parts, fmt.Sprintf("stalled %d time(s), %d warning(s)", n, k[herd.EventStallWarning]))
		}
		if n := k[herd.EventEscalated]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d escalation(s)", n))
		}
		if v.Activity != herd.ActivityUnknown && v.Activity != "" {
			parts = append(parts, "activity "+string(v.Activity))
		}
		if len(parts) > 0 {
			b.WriteString(": " + strings.Join(parts, "; "))
		}
		b.WriteString("\n")
	}
	kinds := map[string]int{}
	for _, e := range events {
		kinds[e.Kind]++
	}
	var names []string
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	b.WriteString("Events:")
	for _, k := range names {
		fmt.Fprintf(&b, " %s=%d", k, kinds[k])
	}
	b.WriteString("\n")
	return b.String()
}
