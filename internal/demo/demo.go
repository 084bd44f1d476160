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
	"herd/internal/cells"
	"herd/internal/config"
	"herd/internal/daemon"
	"herd/internal/redraw"
	"herd/internal/runtime/tmux"
	"herd/internal/store/sqlite"
	"herd/internal/web"
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
	// Term, when the output is a terminal, has the live table drawn in
	// place; else each change is printed as a new table.
	Term redraw.Terminal
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
	runtime, err := pickRuntime(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "state dir %s; the daemon log is %s\n", dir, filepath.Join(dir, "daemon.log"))
	if !o.Keep {
		fmt.Fprintln(o.Out, "(both are removed at the end; --keep keeps them)")
	}
	fmt.Fprintln(o.Out)

	stop, err := startDaemon(ctx, o, dir, runtime)
	if err != nil {
		return err
	}
	defer stop()

	c := api.NewClient(daemon.SocketPath(dir))
	roles := demoRoles(self, dir, runtime)
	if err := c.Do(ctx, http.MethodPost, "/v1/roles", nil, roles, nil); err != nil {
		return fmt.Errorf("demo: declare roles: %w", err)
	}
	fmt.Fprintln(o.Out, "declared roles:")
	for _, r := range roles {
		fmt.Fprintf(o.Out, "  %-10s %s\n", r.Name, describeRole(r.Name))
	}
	var link web.LinkResult
	if err := c.Do(ctx, http.MethodPost, web.LinkPath, nil, web.LinkRequest{}, &link); err == nil {
		fmt.Fprintf(o.Out, "console: %s (a single-use login link)\n", link.URL)
	}
	fmt.Fprintln(o.Out)

	watchErr := live(ctx, c, o)
	finish(o, c, self, dir, roles, watchErr)
	if errors.Is(watchErr, context.Canceled) {
		return nil
	}
	return watchErr
}

// pickRuntime is the runtime the demo's agents run in (tmux when it is
// installed), said out loud.
func pickRuntime(o Options) (string, error) {
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
		return "", fmt.Errorf("demo: unknown runtime %q", runtime)
	}
	return runtime, nil
}

// startDaemon starts the demo's own daemon with its state in dir; stop
// stops it (and its tmux server) and closes what it used.
func startDaemon(ctx context.Context, o Options, dir, runtime string) (stop func(), err error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	cfg := demoConfig()
	logFile, err := os.Create(filepath.Join(dir, "daemon.log"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	undo = append(undo, func() { logFile.Close() })
	ln, release, err := daemon.Listen(dir)
	if err != nil {
		return nil, err
	}
	undo = append(undo, release)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "herd.db"))
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { st.Close() })
	d, err := daemon.New(daemon.Options{
		StateDir: dir, Config: cfg, Store: st, Version: o.Version, StopGrace: 2 * time.Second,
		CaptureCommand: daemon.CaptureCommand(), EnterCommand: daemon.EnterCommand(),
		Logger: slog.New(slog.NewTextHandler(logFile, nil)),
	})
	if err != nil {
		return nil, err
	}
	runCtx, stopDaemon := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, ln) }()
	undo = append(undo, func() {
		stopDaemon()
		<-done
		if runtime == herd.RuntimeTmux {
			c := &tmux.Client{Binary: cfg.Tmux.Binary, Socket: cfg.Tmux.Socket, Timeout: 5 * time.Second}
			c.KillServer(context.Background())
		}
	})
	return cleanup, nil
}

// finish shows the summary (and the stalled agent's describe when the
// demo ran its course), then deletes every role through the daemon's stop
// path.
func finish(o Options, c *api.Client, self, dir string, roles []herd.Role, watchErr error) {
	cleanCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var views []api.SessionView
	_ = c.Do(cleanCtx, http.MethodGet, "/v1/sessions", nil, nil, &views)
	var events []herd.Event
	_ = c.Do(cleanCtx, http.MethodGet, "/v1/events", nil, nil, &events)
	fmt.Fprint(o.Out, "\n"+Summary(views, events))
	if watchErr == nil {
		describeStalled(cleanCtx, o.Out, self, dir, views)
	}
	for _, r := range roles {
		if err := c.Do(cleanCtx, http.MethodDelete, "/v1/roles/"+r.Name, nil, nil, nil); err != nil {
			fmt.Fprintf(o.Out, "cleanup: delete role %s: %v\n", r.Name, err)
		}
	}
	fmt.Fprintln(o.Out, "cleaned up: every agent stopped, the demo's daemon and tmux server shut down.")
	if o.Keep {
		fmt.Fprintf(o.Out, "state kept in %s\n", dir)
	} else {
		fmt.Fprintf(o.Out, "removed %s and the daemon log in it (--keep keeps them)\n", dir)
	}
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
		role("crashloop", sim("--interval", "300ms", "--signal", "SEGV", "--signal-after", "2s", "--hooks", "SessionStart,UserPromptSubmit,PreToolUse:Bash")),
		// The stall comes mid-turn: only a working agent can stall (an
		// idle one is just done).
		role("staller", sim("--interval", "500ms", "--silent-after", "3s", "--hooks", "SessionStart,UserPromptSubmit")),
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
		return "goes silent mid-turn after 3s while staying alive: a stall"
	case "waiter":
		return "asks for permission and waits for a person"
	}
	return ""
}

// Legend explains the table's words; printed once above the live table.
const Legend = `STATE running | stalled (alive but silent too long) | backoff (crashed, relaunching after a delay) | failed (restart budget spent)
      a "!" after the state: a notification or escalation is open, a person should look (here: a wait for permission, a spent budget)
ACTIVITY from the agent's hooks: working | waiting (for permission or input) | idle (turn finished)
`

// pollEvery is how often the live table is fetched.
const pollEvery = 500 * time.Millisecond

// overtime is how long the live table goes on past the duration while an
// agent has not yet shown what it is there to show (on a busy machine
// the crash loop takes longer to spend its restarts).
const overtime = 30 * time.Second

// live shows the session table until the duration ends and every agent
// has shown its story (see told), at most overtime more, or until ctx is
// done. A table is drawn only when it changed: in place on a terminal,
// else as a new table under a timestamp.
func live(ctx context.Context, c *api.Client, o Options) error {
	end := time.Now().Add(o.Duration)
	title := fmt.Sprintf("live until %s (Ctrl-C ends the demo early)", end.Format("15:04:05"))
	if o.Term == nil {
		fmt.Fprint(o.Out, Legend+"\n")
	}
	last, first := "", true
	for {
		var views []api.SessionView
		if err := c.Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
			return err
		}
		if t := Table(views); len(views) > 0 && t != last {
			if o.Term != nil {
				io.WriteString(o.Out, redraw.Frame(title+"\n\n"+Legend+"\n"+t, o.Term.Height(), first))
				first = false
			} else {
				fmt.Fprintf(o.Out, "--- %s\n%s", time.Now().Format("15:04:05"), t)
			}
			last = t
		}
		if now := time.Now(); !now.Before(end.Add(overtime)) || (!now.Before(end) && told(views)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// told reports whether each of the demo's agents shows what it is there
// to show: the crash loop failed, the staller stalled, the waiter waiting
// for a person.
func told(views []api.SessionView) bool {
	want := map[string]func(api.SessionView) bool{
		"crashloop-0": func(v api.SessionView) bool { return v.State == herd.StateFailed },
		"staller-0":   func(v api.SessionView) bool { return v.State == herd.StateStalled },
		"waiter-0":    func(v api.SessionView) bool { return v.Activity == herd.ActivityWaiting },
	}
	n := 0
	for _, v := range views {
		if ok, known := want[v.Name]; known {
			if !ok(v) {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// Table renders sessions the way `herd get sessions` does, compactly and
// with nothing relative to now, so an unchanged fleet draws the same table.
func Table(views []api.SessionView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s %-9s %-8s %-9s %-8s %-14s %s\n", "NAME", "STATE", "PROCESS", "ACTIVITY", "RESTARTS", "BACKOFF-UNTIL", "LAST-EXIT")
	for _, v := range views {
		backoff := "-"
		if v.BackoffUntil != nil {
			backoff = v.BackoffUntil.Local().Format("15:04:05")
		}
		fmt.Fprintf(&b, "%-12s %-9s %-8s %-9s %-8d %-14s %s\n", v.Name, cells.State(v), v.Process, cells.Activity(v), v.Restarts, backoff, cells.Exit(v.Exit))
	}
	return b.String()
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
			crashes := fmt.Sprintf("%d crash(es)", n)
			if v.Exit != nil {
				crashes += " (last: " + cells.Exit(v.Exit) + ")"
			}
			parts = append(parts, crashes)
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

// describeStalled shows `herd describe session` of the stalled agent, run
// as the user would run it, for its /proc diagnostics.
func describeStalled(ctx context.Context, out io.Writer, self, dir string, views []api.SessionView) {
	name := ""
	for _, v := range views {
		if v.State == herd.StateStalled {
			name = v.Name
			break
		}
	}
	if name == "" {
		return
	}
	fmt.Fprintf(out, "\nThe stalled agent, as `herd describe session %s` shows it (its /proc diagnostics: CPU, RSS, own TCP, wchan):\n", name)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "--state-dir", dir, "describe", "session", name)
	cmd.Env = append(os.Environ(), "HERD_CONFIG=")
	b, err := cmd.CombinedOutput()
	if err != nil {
		fmt.Fprintf(out, "describe %s: %v: %s\n", name, err, strings.TrimSpace(string(b)))
		return
	}
	out.Write(b)
}
