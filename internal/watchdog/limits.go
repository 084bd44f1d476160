package watchdog

import (
	"context"
	"errors"
	"fmt"

	"herd"
	"herd/internal/cgroup"
	"herd/internal/diag"
	"herd/internal/slots"
)

// watchMemory enforces memory_max where the kernel does not (no memory
// controller, or no cgroup at all): the resident memory of each
// incarnation's whole tree is summed, and a tree over its role's limit is
// stopped through slots' kill with reason memory_max, which the one crash
// path then accounts (backoff, restart per policy) like any crash.
func (w *Watchdog) watchMemory(ctx context.Context, items []watchItem, roles map[string]herd.Role) {
	c := w.o.Contain
	if c == nil || c.KernelMemoryMax() || len(items) == 0 {
		return
	}
	var over []watchItem
	var incs []string
	for _, it := range items {
		if roles[it.S.Role].MemoryMax > 0 {
			over = append(over, it)
			incs = append(incs, it.Inc.ID)
		}
	}
	if len(incs) == 0 {
		return
	}
	mem, err := c.Memory(incs)
	if err != nil {
		w.o.Log.Warn("watchdog: memory_max not checked", "err", err)
		return
	}
	for _, it := range over {
		max := roles[it.S.Role].MemoryMax
		if !cgroup.OverMemory(mem[it.Inc.ID].RSS, max) {
			continue
		}
		w.mu.Lock()
		busy := w.memKills[it.Inc.ID]
		if !busy {
			if w.memKills == nil {
				w.memKills = map[string]bool{}
			}
			w.memKills[it.Inc.ID] = true
		}
		w.mu.Unlock()
		if busy {
			continue // its kill is under way
		}
		w.kills.Go("memory_max kill", func() {
			defer func() {
				w.mu.Lock()
				delete(w.memKills, it.Inc.ID)
				w.mu.Unlock()
			}()
			w.memoryKill(ctx, it, max)
		})
	}
}

// memoryKill stops an incarnation whose tree is over its memory_max, after
// a last look (still the session's incarnation, still over the limit).
func (w *Watchdog) memoryKill(ctx context.Context, it watchItem, max int64) {
	lastLook := func(ctx context.Context) (string, map[string]any, error) {
		cur, err := w.st.Session(ctx, it.S.Name)
		if err != nil {
			return "", nil, err
		}
		if cur.Incarnation != it.Inc.ID || !cur.State.Live() {
			return "", nil, errors.New("no longer the live incarnation")
		}
		mem, err := w.o.Contain.Memory([]string{it.Inc.ID})
		if err != nil {
			return "", nil, err
		}
		m := mem[it.Inc.ID]
		if !cgroup.OverMemory(m.RSS, max) {
			return "", nil, errors.New("back under memory_max")
		}
		msg := fmt.Sprintf("resident memory %s of %d process(es) is over memory_max %s", mib(m.RSS), m.Procs, mib(max))
		return msg, map[string]any{"rss_bytes": m.RSS, "memory_max": max, "processes": m.Procs}, nil
	}
	killed, err := w.o.Slots.Kill(ctx, slots.KillRequest{Inc: it.Inc, Reason: herd.ReasonMemoryMax, Guard: lastLook})
	switch {
	case err != nil:
		w.o.Log.Warn("watchdog: agent over memory_max not stopped", "session", it.S.Name, "err", err)
	case killed:
		w.o.Log.Warn("agent stopped over memory_max", "session", it.S.Name, "memory_max", max)
	}
}

// mib prints a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

// cgroupUsage is what the incarnation's cgroup counts, for diagnostics;
// nil when it runs in none.
func (w *Watchdog) cgroupUsage(inc string) *diag.Cgroup {
	if w.o.Contain == nil || w.o.Contain.Mode() != cgroup.ModeCgroup {
		return nil
	}
	u, err := w.o.Contain.Usage(inc)
	if err != nil || u.Source != cgroup.ModeCgroup {
		return nil
	}
	src := "rss"
	if u.MemoryCurrent {
		src = "memory.current"
	}
	return &diag.Cgroup{CPUSeconds: u.CPU.Seconds(), MemoryBytes: u.Memory, MemorySource: src, OOMKills: u.OOMKills}
}
