package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
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
Roles declared in the config file are applied at start. SIGHUP (or
'herd reload') reads the config file again.`,
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
			if err := recordConfig(dir, path); err != nil {
				return err
			}
			st, err := backend.Open(cmd.Context(), cfg.Store, dir)
			if err != nil {
				return err
			}
			defer st.Close()
			d, err := daemon.New(daemon.Options{StateDir: dir, Config: cfg, Store: st, Logger: log, Version: version,
				CaptureCommand: daemon.CaptureCommand(), EnterCommand: daemon.EnterCommand(), Load: g.loadConfig})
			if err != nil {
				return err
			}
			if len(cfg.Roles) > 0 {
				if err := d.ApplyRoles(cmd.Context(), cfg.Roles); err != nil {
					return err
				}
				log.Info("roles applied from config", "file", path, "roles", len(cfg.Roles))
			}
			stopHUP := reloadOnHUP(cmd.Context(), d, log)
			defer stopHUP()
			start := time.Now()
			err = d.Run(cmd.Context(), ln)
			log.Info("daemon stopped", "uptime", time.Since(start).Round(time.Second))
			return err
		},
	}
	cmd.Flags().BoolVar(&debug, "debug", false, "log at debug level")
	return cmd
}

// reloadOnHUP reloads the daemon's config on each SIGHUP until ctx ends
// or stop is called.
func reloadOnHUP(ctx context.Context, d *daemon.Daemon, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				res, err := d.Reload(ctx)
				if err != nil {
					log.Error("SIGHUP: config not reloaded", "err", err)
					continue
				}
				log.Info("SIGHUP: " + res.Message)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}
