package main

import (
	"log/slog"
	"os"
	"time"

	"herd/internal/daemon"
	"herd/internal/store/backend"

	"github.com/spf13/cobra"
)

func newDaemonCmd(g *globals) *cobra.Command {
	var debug bool
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the supervisor in the foreground until SIGINT/SIGTERM",
		Long: `Run the supervisor in the foreground. It listens on <state-dir>/herd.sock
(mode 0600), keeps every role's replicas running, and restarts crashes with
backoff. Stopping the daemon never stops the agents: a restarted daemon
re-adopts them after verifying their identity (pid, start time, boot id).
Roles declared in the config file are applied at start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := g.dir()
			if err != nil {
				return err
			}
			cfg, path, err := g.loadConfig()
			if err != nil {
				return err
			}
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ln, release, err := daemon.Listen(dir)
			if err != nil {
				return err
			}
			defer release()
			st, err := backend.Open(cmd.Context(), cfg.Store, dir)
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := daemon.New(daemon.Options{StateDir: dir, Config: cfg, Store: st, Logger: log, Version: version, CaptureCommand: daemon.CaptureCommand()})
			if err != nil {
				return err
			}
			if len(cfg.Roles) > 0 {
				if err := d.ApplyRoles(cmd.Context(), cfg.Roles); err != nil {
					return err
				}
				log.Info("roles applied from config", "file", path, "roles", len(cfg.Roles))
			}
			start := time.Now()
			err = d.Run(cmd.Context(), ln)
			log.Info("daemon stopped", "uptime", time.Since(start).Round(time.Second))
			return err
		},
	}
	cmd.Flags().BoolVar(&debug, "debug", false, "log at debug level")
	return cmd
}
