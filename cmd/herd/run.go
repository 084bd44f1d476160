package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"herd"
	"herd/internal/api"
	"herd/internal/config"
)

func newRunCmd(g *globals) *cobra.Command {
	var (
		restart, runtime, workdir, agent, agentProcess string
		envs                                           []string
		replicas                                       int
	)
	cmd := &cobra.Command{
		Use:   "run NAME [flags] -- CMD [ARG...]",
		Short: "Declare a one-replica role from the command line",
		Long: `Declare (or replace) a role named NAME that runs CMD. The command is an argv,
never passed to a shell. Restart settings not given take the daemon's
[restart] defaults. The command must exist: a name is looked up in PATH (the
role's --env PATH=... if given), a path is taken relative to the workdir.`,
		Example: `  herd run worker -- claude
  herd run flaky --runtime exec --restart on-failure -- ./agent.sh --fast
  herd run shell-wrapped --agent claude -- sh -c 'claude; exec bash'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return fmt.Errorf("run: NAME is required")
			}
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return fmt.Errorf("run: give the command after --, e.g. herd run %s -- claude", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, argv := args[0], args[1:]
			if err := checkRole("run", name); err != nil {
				return err
			}
			env := map[string]string{}
			for _, kv := range envs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("run: --env %q: want KEY=VALUE", kv)
				}
				env[k] = v
			}
			dir := workdir
			if dir == "" {
				dir, _ = os.Getwd()
			}
			cwd, _ := os.Getwd()
			dir, err := config.ExpandWorkdir(dir, cwd)
			if err != nil {
				return fmt.Errorf("run: --workdir: %w", err)
			}
			if _, err := resolveCommand(argv[0], dir, env, os.Getenv("PATH")); err != nil {
				return fmt.Errorf("run: %w", err)
			}
			role := herd.Role{
				Name: name, Replicas: replicas, Command: argv, Workdir: filepath.Clean(dir), Env: env,
				Runtime: runtime, Agent: agent, AgentProcess: agentProcess,
				Restart: herd.RestartPolicy{Policy: restart},
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var res api.Result
			if err := c.Do(cmd.Context(), http.MethodPost, "/v1/roles", nil, []herd.Role{role}, &res); err != nil {
				return explain(err, g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "role/%s configured (replicas %d)\n", name, replicas)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&restart, "restart", "", "restart policy: always | on-failure | never (default: the daemon's)")
	f.StringVar(&runtime, "runtime", "", "runtime: tmux | exec (default tmux)")
	f.StringVar(&workdir, "workdir", "", "working directory (default: the current one)")
	f.StringArrayVar(&envs, "env", nil, "environment KEY=VALUE (repeatable)")
	f.StringVar(&agent, "agent", "", "agent kind: claude | codex | gemini | generic (default: from the command)")
	f.StringVar(&agentProcess, "agent-process", "", "when the command is a wrapper: the agent process's name")
	f.IntVar(&replicas, "replicas", 1, "number of replicas")
	return cmd
}
