package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"herd/internal/api"
)

// reaperFirstPass is how soon after the daemon starts the first reaper
// pass runs (sooner when reaper.interval is shorter).
const reaperFirstPass = 10 * time.Second

// reaperLoop runs a reaper pass every reaper.interval, the first one
// shortly after the daemon starts. The reaper stops, through the one stop
// path, the sessions nobody needs: archived, orphaned (workdir gone, role
// no longer declared, herd-named tmux session with no record) and idle
// ones, never an attached one and never on a fact it could not read (see
// package reaper for the policy and reapPass for the round).
func (d *Daemon) reaperLoop(ctx context.Context) {
	interval := d.cfg.Reaper.Interval
	if interval <= 0 {
		<-ctx.Done()
		return
	}
	timer := time.NewTimer(min(reaperFirstPass, interval))
	defer timer.Stop()
	// noted remembers the notes already logged (tmux not installed, ...),
	// so a condition that lasts is logged once, not every pass.
	noted := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		rep, err := d.reapPass(ctx, reapOptions{})
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			d.log.Error("reaper pass aborted; nothing reaped", "err", err)
		default:
			for _, n := range rep.Notes {
				if !noted[n] {
					noted[n] = true
					d.log.Info("reaper: " + n)
				}
			}
			d.logPass(rep)
		}
		timer.Reset(interval)
	}
}

// logPass logs one pass's outcome: every skip with its reason, and a
// summary.
func (d *Daemon) logPass(rep api.ReapReport) {
	for _, c := range rep.Candidates {
		if c.Action == api.ReapActionSkipped {
			d.log.Info("reaper skipped a session", "session", c.Session, "reason", c.Reason, "detail", c.Detail, "err", c.Error)
		}
	}
	d.log.Info("reaper pass", "reaped", rep.Reaped, "kept", rep.Kept, "skipped", rep.Skipped, "took", time.Duration(rep.DurationMS)*time.Millisecond)
}

// handleReap runs one reaper pass now, or a dry run (query dry_run=1 or
// body {"dry_run": true}) that decides and reports but changes nothing.
func (d *Daemon) handleReap(w http.ResponseWriter, r *http.Request) {
	var req api.ReapRequest
	if v := r.URL.Query().Get("dry_run"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fail(w, badf("reap: dry_run: %q is not a boolean", v))
			return
		}
		req.DryRun = b
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		fail(w, badf("reap: read body: %v", err))
		return
	}
	if len(body) > 0 {
		var b api.ReapRequest
		if err := json.Unmarshal(body, &b); err != nil {
			fail(w, badf("reap: bad request body: %v", err))
			return
		}
		req.DryRun = req.DryRun || b.DryRun
	}
	rep, err := d.reapPass(r.Context(), reapOptions{dryRun: req.DryRun})
	if err != nil {
		fail(w, err)
		return
	}
	if !req.DryRun {
		d.logPass(rep)
	}
	reply(w, http.StatusOK, rep)
}
