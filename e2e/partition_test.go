package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/herdtest"
	"herd/internal/pgcluster"
	"herd/internal/testenv"
)

// netHost is one host of the partition test: a network namespace joined
// to the test's by a veth pair, whose only way to PostgreSQL is the
// server's TCP listener on the pair's outer address.
type netHost struct {
	name string
	ns   string
	// outer is the pair's end in the test's namespace: set down, it drops
	// every packet of the host (a partition; nothing is refused).
	outer      string
	outerAddr  string
	innerAddr  string
	e          *env
	partitions int
}

// ipCmd runs ip with args, failing t with its output.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
}

// needNetns skips t, by name, where network namespaces cannot be made.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "network namespaces", "not root: ip netns add needs CAP_SYS_ADMIN")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Skip(t, "network namespaces", "no ip command (iproute2)")
	}
	probe := fmt.Sprintf("herdprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		testenv.Skip(t, "network namespaces", "ip netns add: "+strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "netns", "del", probe).Run()
}

// newNetHost makes host i's namespace and veth pair (removed at cleanup).
func newNetHost(t *testing.T, i int, name string) *netHost {
	t.Helper()
	id := os.Getpid() % 10000
	h := &netHost{
		name:      name,
		ns:        fmt.Sprintf("herdpart%d-%d", id, i),
		outer:     fmt.Sprintf("hp%do%d", id, i),
		outerAddr: fmt.Sprintf("10.%d.%d.1", 200+id%50, i),
		innerAddr: fmt.Sprintf("10.%d.%d.2", 200+id%50, i),
	}
	inner := fmt.Sprintf("hp%di%d", id, i)
	// Removed by the test's cleanup, or by the run's reaper when the run
	// does not get that far (a timeout, a panic).
	herdtest.OnUnfinished(t, "ip", "netns", "del", h.ns)
	ipCmd(t, "netns", "add", h.ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", h.ns).Run() })
	herdtest.OnUnfinished(t, "ip", "link", "del", h.outer)
	ipCmd(t, "link", "add", h.outer, "type", "veth", "peer", "name", inner)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", h.outer).Run() })
	ipCmd(t, "link", "set", inner, "netns", h.ns)
	ipCmd(t, "addr", "add", h.outerAddr+"/30", "dev", h.outer)
	ipCmd(t, "link", "set", h.outer, "up")
	ipCmd(t, "-n", h.ns, "addr", "add", h.innerAddr+"/30", "dev", inner)
	ipCmd(t, "-n", h.ns, "link", "set", inner, "up")
	ipCmd(t, "-n", h.ns, "link", "set", "lo", "up")
	return h
}

// cut drops, or lets through again, every packet between host h and the
// server: the pair's outer end down or up.
func (h *netHost) cut(t *testing.T, down bool) {
	t.Helper()
	state := "up"
	if down {
		state = "down"
		h.partitions++
	}
	ipCmd(t, "link", "set", h.outer, state)
}

// wrapper writes a script that runs herd inside ns: the daemon is started
// through it (ip netns exec execs herd: the pid stays the daemon's).
func wrapper(t *testing.T, ns string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herd-in-"+ns)
	script := fmt.Sprintf("#!/bin/sh\nexec ip netns exec %s %s \"$@\"\n", ns, bin)
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// slotSample is one read of /proc: the live agents of each slot of the
// failover role, by host.
type slotSample map[string][]string

// sampleSlots reads which agent processes (comm sleep) of each session
// of role are alive, and on which host (the daemon socket in their
// environment names it).
func sampleSlots(role string, hostOf map[string]string) slotSample {
	out := slotSample{}
	entries, _ := os.ReadDir("/proc")
	prefix := []byte(herd.EnvSession + "=" + role + "-")
	for _, en := range entries {
		if _, err := strconv.Atoi(en.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + en.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "sleep" {
			continue
		}
		env, err := os.ReadFile("/proc/" + en.Name() + "/environ")
		if err != nil || !bytes.Contains(env, prefix) {
			continue
		}
		var session, host string
		for _, kv := range bytes.Split(env, []byte{0}) {
			switch {
			case bytes.HasPrefix(kv, []byte(herd.EnvSession+"=")):
				session = string(kv[len(herd.EnvSession)+1:])
			case bytes.HasPrefix(kv, []byte(herd.EnvSocket+"=")):
				host = hostOf[string(kv[len(herd.EnvSocket)+1:])]
			}
		}
		if session != "" {
			out[session] = append(out[session], host+":"+en.Name())
		}
	}
	return out
}

// TestPartitionFencing: three daemons, each in a network namespace of its
// own, on one PostgreSQL reached through a veth pair each. A failover role
// spread over the three (declared with herd run --hosts --spread
// --failover), a placed role without failover and an unplaced role on each
// host. Host links to PostgreSQL are cut (every packet dropped) one at a
// time for random lengths, shorter and longer than the 2s lease, while a
// sampler reads /proc every 100 ms: at no sample does a failover slot have
// two live agents, no agent of the other roles is ever killed, and after
// each heal every slot runs again. The test command cuts eight links;
// HERD_CAMPAIGN=full (scripts/chaos.sh) twenty.
func TestPartitionFencing(t *testing.T) {
	needNetns(t)
	const lease = 2 * time.Second
	names := []string{"pa", "pb", "pc"}
	var hosts []*netHost
	var addrs []string
	for i, name := range names {
		h := newNetHost(t, i+1, name)
		hosts = append(hosts, h)
		addrs = append(addrs, h.outerAddr)
	}
	// The server listens on the pairs' outer addresses only: each host
	// reaches it over its own link, and a link cut is a partition (the
	// server's own keepalives end a cut-off session, and the locks it
	// holds, as they would across a real network).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pg, err := pgcluster.StartListening(ctx, addrs...)
	cancel()
	if errors.Is(err, pgcluster.ErrNoBinaries) {
		testenv.Require(t, "PostgreSQL", err.Error(), testenv.InstallPostgres)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pg.Stop(ctx); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	hostOf := map[string]string{} // daemon socket -> host
	for _, h := range hosts {
		name := h.name
		hdsn := fmt.Sprintf("host=%s port=%d user=herd dbname=postgres sslmode=disable connect_timeout=2", h.outerAddr, pg.Port())
		h.e = newFleetEnv(t, name, hdsn, fmt.Sprintf("lease = %q", lease.String()))
		// A daemon cut off from its store says so, loudly: expected here.
		h.e.sb.ExpectErrors(`i/o timeout`, `timeout`, `deadline exceeded`, `context canceled`, `connection`, `conn closed`,
			`EOF`, `broken pipe`, `unreachable`, `failed to connect`, `no route`, `closed network`)
		h.e.daemon = h.e.sb.Daemon(wrapper(t, h.ns), h.e.extra())
		hostOf[h.e.socket] = name
	}
	a := hosts[0].e
	a.must("run", "fo", "--replicas", "3", "--hosts", "pa,pb,pc", "--spread", "--failover", "--runtime", "exec", "--", "sleep", "3600")
	a.must("run", "sp", "--replicas", "3", "--spread", "--runtime", "exec", "--", "sleep", "3600")
	for _, h := range hosts {
		h.e.must("run", "local-"+h.name, "--runtime", "exec", "--", "sleep", "3600")
	}
	allRunning := func() bool {
		running := 0
		views, ok := trySessions(a)
		if !ok {
			return false // a's store a moment away (just healed): ask again
		}
		for _, v := range views {
			if v.State == herd.StateRunning {
				running++
			}
		}
		if running != 9 {
			return false
		}
		s := sampleSlots("fo", hostOf)
		for i := range 3 {
			if len(s[fmt.Sprintf("fo-%d", i)]) != 1 {
				return false
			}
		}
		return true
	}
	a.waitFor("every session running, one agent per failover slot", 60*time.Second, allRunning)
	// The agents that must never be killed: the non-failover ones.
	keep := map[int]string{}
	for _, h := range hosts {
		for _, v := range h.e.sessions() {
			if v.Host == h.name && (v.Role == "sp" || strings.HasPrefix(v.Role, "local-")) {
				for _, pid := range sessionPIDs(h.e, v.Name) {
					keep[pid] = v.Name
				}
			}
		}
	}
	if len(keep) < 6 {
		t.Fatalf("expected the 6 non-failover agents, got %v", keep)
	}

	// The sampler: every 100 ms, the live agents of each failover slot.
	var (
		mu       sync.Mutex
		samples  int
		doubles  []string
		maxAlive int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			s := sampleSlots("fo", hostOf)
			mu.Lock()
			samples++
			for slot, live := range s {
				maxAlive = max(maxAlive, len(live))
				if len(live) > 1 {
					doubles = append(doubles, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), slot, live))
				}
			}
			mu.Unlock()
		}
	})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	partitions := campaign(8, 20)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var short, long, moved, leaderCuts int
	var heals []time.Duration
	after := foHosts(a)
	started := time.Now()
	for i := range partitions {
		h := hosts[rng.IntN(len(hosts))]
		// Half shorter than the lease, half longer (up to four leases:
		// past the lease, the margin and the host timeout, the slots
		// move).
		d := time.Duration(300+rng.IntN(1500)) * time.Millisecond
		if i%2 == 1 {
			d = lease + time.Duration(rng.IntN(int(3*lease/time.Millisecond)))*time.Millisecond
		}
		if i%4 == 3 {
			// The placement leader itself, long enough for the server
			// to drop its lock and another daemon to move its slots.
			l := tryLeader(a)
			for _, c := range hosts {
				if c.name == l {
					h, d = c, 3*lease+time.Duration(rng.IntN(int(lease/time.Millisecond)))*time.Millisecond
					leaderCuts++
				}
			}
		}
		if d < lease {
			short++
		} else {
			long++
		}
		before := after
		h.cut(t, true)
		<-time.After(d) // the partition's length: a duration, not a condition
		h.cut(t, false)
		healed := time.Now()
		a.waitFor(fmt.Sprintf("partition %d (%s, %v): every slot running again", i, h.name, d), 60*time.Second, allRunning)
		heals = append(heals, time.Since(healed))
		after = map[string]string{}
		if views, ok := trySessions(a); ok {
			for _, v := range views {
				if v.Role == "fo" && v.State == herd.StateRunning {
					after[v.Name] = v.Host
				}
			}
		}
		for slot, host := range before {
			if after[slot] != host {
				moved++
			}
		}
		t.Logf("partition %d: %s cut for %v; every slot running %v after the heal; fo on %v", i, h.name, d.Round(time.Millisecond), heals[i].Round(time.Millisecond), after)
	}
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	killed := 0
	for pid, name := range keep {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			killed++
			t.Errorf("non-failover agent %s (pid %d) was killed", name, pid)
		}
	}
	var fenced int
	for _, ev := range a.events("--kind", herd.EventStopped) {
		if ev.Reason == herd.ReasonFenced {
			fenced++
		}
	}
	var slowest time.Duration
	for _, d := range heals {
		slowest = max(slowest, d)
	}
	t.Logf("figures: %d partitions (%d shorter than the %v lease, %d longer) in %v; %d samples at 100 ms; "+
		"%d instants with two live agents for one slot (most agents of one slot at once: %d); %d non-failover agents killed; "+
		"%d fenced stops; %d slot moves; %d cuts of the placement leader; every slot running again within %v of each heal",
		partitions, short, lease, long, time.Since(started).Round(time.Second), samples, len(doubles), maxAlive, killed, fenced, moved, leaderCuts, slowest.Round(time.Millisecond))
	if len(doubles) > 0 {
		t.Errorf("expected no instant with two live agents for one slot, got %d:\n%s", len(doubles), strings.Join(doubles, "\n"))
	}
	if samples < int(time.Since(started)/(200*time.Millisecond)) {
		t.Errorf("expected a sample every 100 ms, got %d in %v", samples, time.Since(started))
	}
	if long > 0 && fenced == 0 {
		t.Errorf("expected partitions longer than the lease to fence failover agents, got no fenced stop")
	}
}

// foHosts maps the failover role's running sessions to their host.
func foHosts(e *env) map[string]string {
	return hostsOf(e, "fo", herd.StateRunning)
}

// trySessions is e's sessions, or false when the CLI could not list them
// (the daemon's store out of reach for a moment).
func trySessions(e *env) ([]api.SessionView, bool) {
	out, _, code := e.herd("get", "sessions", "-o", "json")
	var views []api.SessionView
	if code != 0 || json.Unmarshal([]byte(out), &views) != nil {
		return nil, false
	}
	return views, true
}

// tryLeader is the host e's `get hosts` names the placement leader, or ""
// (none, or the CLI could not tell).
func tryLeader(e *env) string {
	out, _, code := e.herd("get", "hosts", "-o", "json")
	var views []api.HostView
	if code != 0 || json.Unmarshal([]byte(out), &views) != nil {
		return ""
	}
	for _, v := range views {
		if v.Leader {
			return v.Name
		}
	}
	return ""
}
