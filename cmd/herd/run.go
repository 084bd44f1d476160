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
		envs, hosts                                    []string
		replicas                                       int
		spread, failover                               bool
	)
	cmd := &cobra.Command{
		Use:   "run NAME [flags] -- CMD [ARG...]",
		Short: "Declare a one-replica role from the command line",
		Long: `Declare (or replace) a role named NAME that runs CMD. The command is an argv,
never passed to a shell. Restart settings not given take the daemon's
[restart] defaults. The command must exist: a name is looked up in PATH (the
role's --env PATH=... if given), a path is taken relative to the workdir.

In a fleet, --hosts, --spread and --failover place the role as the role keys
hosts, spread and failover do: on the first live host listed, or spread
over the live hosts (of --hosts when given), and with --failover a slot of a
host that is gone moves to another once that host's lease has ended.`,
		Example: `  herd run worker -- claude
  herd run flaky --runtime exec --restart on-failure -- ./agent.sh --fast
  herd run shell-wrapped --agent claude -- sh -c 'claude; exec bash'
  herd run spread --replicas 4 --hosts hosta,hostb --spread --failover -- claude`,
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
			if err := placeRole(&role, hosts, spread, failover); err != nil {
				return fmt.Errorf("run: %w", err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var res api.Result
			if err := c.Do(cmd.Context(), http.MethodPost, "/v1/roles", nil, []herd.Role{role}, &res); err != nil {
				return explain(err, g)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "role/%s configured (replicas %d%s)\n", name, replicas, runPlacementText(role))
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
	f.StringSliceVar(&hosts, "hosts", nil, "hosts the role may run on, in order of preference (comma-separated or repeated)")
	f.BoolVar(&spread, "spread", false, "spread the replicas over the live hosts (of --hosts when given)")
	f.BoolVar(&failover, "failover", false, "move the slots of a host that is gone to another (needs --hosts or --spread)")
	return cmd
}

// placeRole sets the placement flags of herd run on r: the hosts (each
// named once, no white space), spread, and failover, which needs one of
// them.
func placeRole(r *herd.Role, hosts []string, spread, failover bool) error {
	seen := map[string]bool{}
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			return fmt.Errorf("--hosts: an empty host name")
		case strings.ContainsFunc(h, func(c rune) bool { return c <= ' ' || c == 0x7f }):
			return fmt.Errorf("--hosts: %q contains white space or a control character", h)
		case seen[h]:
			return fmt.Errorf("--hosts: %q is listed twice", h)
		}
		seen[h] = true
		r.Hosts = append(r.Hosts, h)
	}
	r.Spread, r.Failover = spread, failover
	if failover && !r.Placed() {
		return fmt.Errorf("--failover needs --hosts or --spread: a role without placement runs only on the host that declared it")
	}
	return nil
}

// runPlacementText is what herd run says of a placed role's placement.
func runPlacementText(r herd.Role) string {
	if !r.Placed() {
		return ""
	}
	var parts []string
	if len(r.Hosts) > 0 {
		parts = append(parts, "hosts "+strings.Join(r.Hosts, ","))
	}
	if r.Spread {
		parts = append(parts, "spread")
	}
	if r.Failover {
		parts = append(parts, "failover")
	}
	return ", " + strings.Join(parts, ", ")
}
