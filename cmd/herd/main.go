// Command herd supervises AI coding-agent sessions running in tmux panes or as child processes.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/daemon"
)

// globals are the flags every command shares.
type globals struct {
	stateDir string
	config   string
	// noAutostart: this command never starts a daemon (completion).
	noAutostart bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRoot()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "herd: "+err.Error())
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "herd",
		Short: "Supervise AI coding-agent sessions",
		Long: `herd keeps the declared number of coding agents (Claude Code, Codex, Gemini CLI,
any long-running CLI) running per role, in tmux panes or as child processes.
It tells a dead agent from a live one even when its pane survives, restarts
crashes with crash-loop backoff, and shows it all like kubectl.

Start the supervisor with 'herd daemon', declare agents with 'herd run' or
'herd apply -f herd.toml', and watch them with 'herd get sessions -w'.
Try it all with no setup: 'herd demo'.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", "", "state directory (env HERD_STATE_DIR; default $XDG_STATE_HOME/herd or ~/.local/state/herd)")
	root.PersistentFlags().StringVar(&g.config, "config", "", "config file (env HERD_CONFIG; default <state-dir>/herd.toml if present)")
	root.AddCommand(
		newDaemonCmd(g), newDemoCmd(g), newApplyCmd(g), newRunCmd(g), newGetCmd(g),
		newDescribeCmd(g), newEventsCmd(g), newLogsCmd(g), newAttachCmd(g), newInjectCmd(g),
		newStopCmd(g), newResumeCmd(g), newScaleCmd(g), newDeleteCmd(g), newArchiveCmd(g), newReapCmd(g),
		newVersionCmd(), newSimCmd(), newHookCmd(g), newHooksCmd(g), newCaptureCmd(), newCgexecCmd(), newWorktreeCmd(g),
		newStartupCmd(g), newTopCmd(g),
		newRestartCmd(g), newResetCmd(g), newSignalCmd(g), newRolloutCmd(g), newReloadCmd(g), newWebCmd(g),
		newWaitCmd(g), newMCPCmd(g), newUsageCmd(g), newTaskCmd(g),
	)
	return root
}

// dir resolves the state directory.
func (g *globals) dir() (string, error) {
	if g.stateDir != "" {
		return filepath.Abs(g.stateDir)
	}
	if v := os.Getenv("HERD_STATE_DIR"); v != "" {
		return filepath.Abs(v)
	}
	if v := os.Getenv("XDG_STATE_HOME"); v != "" {
		return filepath.Join(v, "herd"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find a state directory: %w (use --state-dir)", err)
	}
	return filepath.Join(home, ".local", "state", "herd"), nil
}

// loadConfig reads the config file, or returns the defaults when there is none.
func (g *globals) loadConfig() (*config.Config, string, error) {
	path := g.config
	if path == "" {
		path = os.Getenv("HERD_CONFIG")
	}
	if path == "" {
		dir, err := g.dir()
		if err != nil {
			return nil, "", err
		}
		if p := filepath.Join(dir, "herd.toml"); fileExists(p) {
			path = p
		}
	}
	if path == "" {
		return config.Default(), "", nil
	}
	cfg, err := config.Load(path)
	return cfg, path, err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// client returns an API client for the daemon of the state directory,
// starting the daemon first when none runs (see ensureDaemon).
func (g *globals) client() (*api.Client, error) {
	dir, err := g.dir()
	if err != nil {
		return nil, err
	}
	if err := g.ensureDaemon(dir); err != nil {
		return nil, err
	}
	return api.NewClient(daemon.SocketPath(dir)), nil
}

// explain turns "nothing answers on the socket" into one line that says
// how to start the daemon.
func explain(err error, g *globals) error {
	if errors.Is(err, api.ErrNoDaemon) {
		dir, _ := g.dir()
		hint := "herd daemon"
		if g.stateDir != "" {
			hint += " --state-dir " + dir
		}
		if autostartOff() {
			return fmt.Errorf("no herd daemon is running for %s; start one with '%s' (%s=%s)", dir, hint, envNoAutostart, os.Getenv(envNoAutostart))
		}
		return fmt.Errorf("no herd daemon is running for %s; start one with '%s'", dir, hint)
	}
	return err
}
