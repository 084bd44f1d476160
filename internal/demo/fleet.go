package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/daemon"
	"herd/internal/pgcluster"
	"herd/internal/runtime/tmux"
	"herd/internal/store/postgres"
)

// fleetHost is one host of the fleet demo: a daemon with its own state dir
// and tmux socket, on the shared PostgreSQL.
type fleetHost struct {
	name, dir string
	dsn       string
	version   string
	client    *api.Client
	// stop ends the daemon (its agents keep running); done reports Run's end.
	stop func()
	done chan error
}

// start runs the host's daemon until stop.
func (h *fleetHost) start(ctx context.Context) error {
	cfg := demoConfig()
	cfg.Daemon.Host = h.name
	cfg.Tmux.Socket = socketName() + "-" + h.name
	cfg.Fleet.HostTimeout = 3 * time.Second
	// A failover slot moves once the old host's lease ended plus the
	// margin: short here, so the demo's host going away shows it soon.
	cfg.Fleet.Lease = 2 * time.Second
	log, err := os.OpenFile(filepath.Join(h.dir, "daemon.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	ln, release, err := daemon.Listen(h.dir)
	if err != nil {
		log.Close()
		return err
	}
	st, err := postgres.Open(ctx, h.dsn)
	if err != nil {
		release()
		log.Close()
		return err
	}
	d, err := daemon.New(daemon.Options{StateDir: h.dir, Config: cfg, Store: st, Version: h.version, StopGrace: 2 * time.Second,
		CaptureCommand: daemon.CaptureCommand(), EnterCommand: daemon.EnterCommand(), Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		st.Close()
		release()
		log.Close()
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	h.done = make(chan error, 1)
	go func() {
		err := d.Run(runCtx, ln)
		st.Close()
		release()
		log.Close()
		h.done <- err
	}()
	h.stop = func() { cancel(); <-h.done }
	h.client = api.NewClient(daemon.SocketPath(h.dir))
	return nil
}

// RunFleet is `herd demo --fleet`: two daemons (hosts demo-a and demo-b)
// with separate state dirs and tmux sockets on one private PostgreSQL
// cluster; a fleet-wide view, commands crossing hosts, and one host's
// daemon stopped: its sessions unknown on the other, never relaunched there,
// adopted again when it comes back.
func RunFleet(ctx context.Context, o Options) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintln(o.Out, "herd demo --fleet: starting a private PostgreSQL cluster ...")
	pg, err := pgcluster.Start(ctx)
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		return fmt.Errorf("demo --fleet needs PostgreSQL's initdb and postgres (Debian: apt-get install postgresql): %w", err)
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer pg.Stop(context.WithoutCancel(ctx))
	root, err := os.MkdirTemp("", "herd-demo-fleet-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if !o.Keep {
		defer os.RemoveAll(root)
	}
	hosts := []*fleetHost{{name: "demo-a"}, {name: "demo-b"}}
	for _, h := range hosts {
		h.dir, h.dsn, h.version = filepath.Join(root, h.name), pg.DSN("postgres"), o.Version
		if err := os.Mkdir(h.dir, 0o700); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if err := h.start(ctx); err != nil {
			return err
		}
	}
	a, b := hosts[0], hosts[1]
	defer func() {
		clean, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cleanFleet(clean, o, a, hosts)
		fmt.Fprintln(o.Out, "cleaned up: every agent stopped, both daemons, their tmux servers and PostgreSQL shut down.")
	}()
	fmt.Fprintf(o.Out, "two daemons, hosts %s and %s, state under %s, sharing one database\n\n", a.name, b.name, root)
	d := &fleetDemo{o: o, a: a, b: b, root: root, self: self}
	for _, step := range []func(context.Context) error{d.ownRoles, d.placedRoles, d.stopElsewhere, d.hostGone, d.hostBack} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if o.Keep {
		fmt.Fprintf(o.Out, "state kept in %s\n", root)
	}
	return nil
}

// fleetDemo is the fleet demo's story, told step by step against hosts a
// and b.
type fleetDemo struct {
	o    Options
	a, b *fleetHost
	root string
	// self is this binary, which runs the simulated agents.
	self string
}

// role is a one-role declaration of simulated agents.
func (d *fleetDemo) role(name string, replicas int) []herd.Role {
	sim := []string{d.self, "sim", "--interval", "1s"}
	return []herd.Role{{Name: name, Replicas: replicas, Command: sim, Workdir: d.root, Runtime: herd.RuntimeExec, Agent: herd.AgentClaude,
		AgentProcess: filepath.Base(d.self),
		Restart:      herd.RestartPolicy{Policy: herd.PolicyAlways, InitialBackoff: time.Second, MaxBackoff: 8 * time.Second, ResetAfter: time.Minute}}}
}

// step announces a step of the story.
func (d *fleetDemo) step(what string) { fmt.Fprintf(d.o.Out, "== %s\n", what) }

// ownRoles: each host runs the roles declared on it.
func (d *fleetDemo) ownRoles(ctx context.Context) error {
	o, a, b, role, step := d.o, d.a, d.b, d.role, d.step
	step("alpha (2 replicas) declared on demo-a, beta (1) on demo-b: each host runs its own roles")
	if err := a.client.Do(ctx, http.MethodPost, "/v1/roles", nil, role("alpha", 2), nil); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := b.client.Do(ctx, http.MethodPost, "/v1/roles", nil, role("beta", 1), nil); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := waitFleet(ctx, a.client, 30*time.Second, func(v []api.SessionView) bool { return countState(v, "", herd.StateRunning) == 3 }); err != nil {
		return err
	}
	if err := showFleet(ctx, o, a.client, "the whole fleet, as demo-a's daemon shows it"); err != nil {
		return err
	}
	return nil
}

// placedRoles: the placement leader spreads one role and places another.
func (d *fleetDemo) placedRoles(ctx context.Context) error {
	o, a, b, role, step := d.o, d.a, d.b, d.role, d.step
	step("placement: gamma (2 replicas, spread = true) and delta (hosts = [\"demo-b\", \"demo-a\"], failover = true), both declared on demo-a; the placement leader puts gamma on both hosts and delta on demo-b, the first host listed")
	gamma, delta := role("gamma", 2), role("delta", 1)
	gamma[0].Spread = true
	delta[0].Hosts, delta[0].Failover = []string{b.name, a.name}, true
	if err := a.client.Do(ctx, http.MethodPost, "/v1/roles", nil, append(gamma, delta...), nil); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	placed := func(v []api.SessionView) bool {
		g := map[string]bool{}
		for _, s := range v {
			if s.Role == "gamma" && s.State == herd.StateRunning {
				g[s.Host] = true
			}
		}
		return len(g) == 2 && hostOf(v, "delta-0", herd.StateRunning) == b.name
	}
	if err := waitFleet(ctx, a.client, 30*time.Second, placed); err != nil {
		return err
	}
	if err := showPlacement(ctx, o, a.client); err != nil {
		return err
	}
	return nil
}

// stopElsewhere: a verb typed on one host runs on the session's host.
func (d *fleetDemo) stopElsewhere(ctx context.Context) error {
	o, a, step := d.o, d.a, d.step
	step("stop beta-0 through demo-a: a command row that demo-b's daemon executes")
	var res api.Result
	if err := a.client.Do(ctx, http.MethodPost, "/v1/sessions/beta-0/stop", nil, nil, &res); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(o.Out, "   %s\n", res.Message)
	if err := a.client.Do(ctx, http.MethodPost, "/v1/sessions/beta-0/resume", nil, nil, &res); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(o.Out, "   %s\n\n", res.Message)
	if err := waitFleet(ctx, a.client, 30*time.Second, func(v []api.SessionView) bool { return countState(v, "", herd.StateRunning) == 6 }); err != nil {
		return err
	}
	return nil
}

// hostGone: a host's daemon stops; its sessions are unknown, and a
// failover role moves.
func (d *fleetDemo) hostGone(ctx context.Context) error {
	o, a, b, step := d.o, d.a, d.b, d.step
	step("demo-b's daemon stops (its agents keep running): within host_timeout (3s) its sessions are unknown, never dead, never relaunched on demo-a — but delta fails over: once demo-b's lease (2s) has ended plus a margin, its slot moves to demo-a")
	b.stop()
	b.stop = nil
	if err := waitFleet(ctx, a.client, 30*time.Second, func(v []api.SessionView) bool {
		return countState(v, b.name, herd.StateUnknown) == 2 && hostOf(v, "delta-0", herd.StateRunning) == a.name
	}); err != nil {
		return err
	}
	if err := showFleet(ctx, o, a.client, "demo-a's view with demo-b gone"); err != nil {
		return err
	}
	return nil
}

// hostBack: the host's daemon is back, adopts its agents and ends its
// moved copy.
func (d *fleetDemo) hostBack(ctx context.Context) error {
	o, a, b, step := d.o, d.a, d.b, d.step
	step("demo-b's daemon is back: it adopts its agents, still the same processes, and ends its copy of delta-0 (stopped, reason moved)")
	if err := b.start(ctx); err != nil {
		return err
	}
	if err := waitFleet(ctx, a.client, 30*time.Second, func(v []api.SessionView) bool { return countState(v, "", herd.StateRunning) == 6 }); err != nil {
		return err
	}
	if err := waitMoved(ctx, a.client, "delta-0", 30*time.Second); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "   delta-0: demo-b's copy stopped (moved); it runs on %s\n\n", a.name)
	if err := showFleet(ctx, o, a.client, "the fleet whole again"); err != nil {
		return err
	}
	return nil
}

// cleanFleet stops every agent of the demo: a daemon the story (or an
// error in it) left stopped is started again first, since only a host's
// own daemon stops its agents; then every role is deleted (placed
// roles first, while every daemon runs to stop its share), and the
// daemons and their tmux servers end.
func cleanFleet(ctx context.Context, o Options, a *fleetHost, hosts []*fleetHost) {
	for _, h := range hosts {
		if h.stop == nil {
			if err := h.start(ctx); err != nil {
				fmt.Fprintf(o.Out, "cleanup: %s's daemon did not start again (%v): its agents may be left\n", h.name, err)
			}
		}
	}
	var roles []api.RoleView
	if err := a.client.Do(ctx, http.MethodGet, "/v1/roles", nil, nil, &roles); err != nil {
		fmt.Fprintf(o.Out, "cleanup: %v\n", err)
	}
	slices.SortStableFunc(roles, func(x, y api.RoleView) int {
		return cmpBool(!x.Role.Placed(), !y.Role.Placed())
	})
	for _, r := range roles {
		c := a.client // an unplaced role is deleted by the host running it
		for _, h := range hosts {
			if _, ok := r.Hosts[h.name]; ok && !r.Role.Placed() {
				c = h.client
			}
		}
		if err := c.Do(ctx, http.MethodDelete, "/v1/roles/"+r.Role.Name, nil, nil, nil); err != nil {
			fmt.Fprintf(o.Out, "cleanup: delete role %s: %v\n", r.Role.Name, err)
		}
	}
	for _, h := range hosts {
		if h.stop != nil {
			h.stop()
		}
		c := &tmux.Client{Binary: "tmux", Socket: socketName() + "-" + h.name, Timeout: 5 * time.Second}
		c.KillServer(ctx)
	}
}

// cmpBool orders false before true.
func cmpBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

// countState counts the sessions in state st (of host, unless "").
func countState(views []api.SessionView, host string, st herd.State) int {
	n := 0
	for _, v := range views {
		if v.State == st && (host == "" || v.Host == host) {
			n++
		}
	}
	return n
}

// waitFleet polls the sessions until cond holds or timeout passes.
func waitFleet(ctx context.Context, c *api.Client, timeout time.Duration, cond func([]api.SessionView) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		var views []api.SessionView
		if err := c.Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		if cond(views) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: the fleet did not settle within %v:\n%s", timeout, FleetTable(views))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// showFleet prints the sessions and the hosts as c's daemon sees them.
func showFleet(ctx context.Context, o Options, c *api.Client, title string) error {
	var views []api.SessionView
	var hosts []api.HostView
	if err := c.Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/hosts", nil, nil, &hosts); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(o.Out, "-- %s\n%s", title, FleetTable(views))
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-7s %-8s %-10s %s\n", "HOST", "DAEMON", "SESSIONS", "HEARTBEAT", "")
	for _, h := range hosts {
		beat := "never"
		if h.HeartbeatAt != nil {
			beat = time.Since(*h.HeartbeatAt).Round(100*time.Millisecond).String() + " ago"
		}
		lead := ""
		if h.Leader {
			lead = "placement leader"
		}
		fmt.Fprintf(&b, "%-8s %-7s %-8d %-10s %s\n", h.Name, h.Daemon, h.Sessions, beat, lead)
	}
	fmt.Fprintf(o.Out, "%s\n", b.String())
	return nil
}

// FleetTable renders sessions with their hosts, compactly.
func FleetTable(views []api.SessionView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-8s %-9s %-8s %s\n", "NAME", "HOST", "STATE", "PROCESS", "PID")
	for _, v := range views {
		fmt.Fprintf(&b, "%-10s %-8s %-9s %-8s %d\n", v.Name, v.Host, v.State, v.Process, v.PID)
	}
	return b.String()
}
