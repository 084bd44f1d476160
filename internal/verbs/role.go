package verbs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/errs"
	"herd/internal/reaper"
	"herd/internal/roles"
)

// RoleRequest names the role of a verb that takes nothing else (delete).
type RoleRequest struct {
	Role string
	From string
}

// ScaleRequest asks for herd scale.
type ScaleRequest struct {
	Role     string
	Replicas int
	From     string
}

// RestartManyRequest asks for herd restart role/NAME (Role set) or
// herd restart --all (Role "").
type RestartManyRequest struct {
	Role  string
	Grace string
}

// RolloutRequest asks for herd rollout restart.
type RolloutRequest struct {
	Role string
	// MaxUnavailable is how many sessions are replaced at once (>= 1).
	MaxUnavailable int
	// Ready bounds the wait for each new incarnation to run ("1m").
	Ready string
	// MinReady: each new incarnation must keep running this long.
	MinReady string
	// All replaces every session, outdated or not.
	All  bool
	From string
}

// RolloutResult is what a rollout did; Error says why it stopped early.
type RolloutResult struct {
	Result
	Replaced []api.RolloutStep `json:"replaced"`
	Left     []string          `json:"left,omitempty"`
	Error    string            `json:"error,omitempty"`
}

// DeleteResult is what deleting a role did.
type DeleteResult struct {
	Result
	Stopped int `json:"stopped"`
}

// ApplyRequest asks for herd apply (or herd run: one role).
type ApplyRequest struct {
	Roles []herd.Role
	// Inherit names, by role, the restart keys filled from the daemon's
	// [restart] defaults.
	Inherit map[string][]string
	DryRun  bool
}

// ApplyResult says what an apply did, or would do, per role.
type ApplyResult struct {
	Result
	Changes []roles.RoleChange `json:"changes"`
}

// ReapRequest asks for one reaper pass of this host.
type ReapRequest struct {
	DryRun bool
}

// Scale sets a role's desired replicas; its failed sessions re-arm. A
// role declared on another host is scaled by that host's daemon.
func (v *Verbs) Scale(ctx context.Context, req ScaleRequest) (Result, error) {
	if req.Replicas < 0 {
		return Result{}, errs.Badf("scale: replicas must be a number >= 0")
	}
	if req.Replicas > config.MaxReplicas {
		return Result{}, errs.Badf("scale: replicas = %d: at most %d per role", req.Replicas, config.MaxReplicas)
	}
	if host, err := v.roleHost(ctx, req.Role, req.From); err != nil || host != "" {
		if err != nil {
			return Result{}, err
		}
		return forward[Result](ctx, v, host, herd.CommandScale, "role", req.Role, map[string]string{"replicas": strconv.Itoa(req.Replicas)}, RemoteTimeout)
	}
	if err := v.o.Roles.Scale(ctx, req.Role, req.Replicas); err != nil {
		return Result{}, err
	}
	return Result{Message: fmt.Sprintf("role %s scaled to %d", req.Role, req.Replicas)}, nil
}

// DeleteRole stops every session of a role through the stop path and
// forgets it. A role declared on another host is deleted by that host's
// daemon, which runs its sessions.
func (v *Verbs) DeleteRole(ctx context.Context, req RoleRequest) (DeleteResult, error) {
	if host, err := v.roleHost(ctx, req.Role, req.From); err != nil || host != "" {
		if err != nil {
			return DeleteResult{}, err
		}
		return forward[DeleteResult](ctx, v, host, herd.CommandDeleteRole, "role", req.Role, nil, opTimeout)
	}
	ctx, cancel := detach(ctx, opTimeout)
	defer cancel()
	n, err := v.o.Roles.DeleteRole(ctx, req.Role)
	if err != nil {
		return DeleteResult{}, err
	}
	return DeleteResult{Result: Result{Message: fmt.Sprintf("role %s deleted (%d session(s) stopped)", req.Role, n)}, Stopped: n}, nil
}

// RestartMany restarts, one after the other, every session of a role (of
// every role when Role is ""), wherever it runs, skipping those stopped on
// purpose. Each goes through Restart: another host's session is restarted
// by its host.
func (v *Verbs) RestartMany(ctx context.Context, req RestartManyRequest) (RestartResult, error) {
	grace, err := ParseGrace("restart", req.Grace)
	if err != nil {
		return RestartResult{}, err
	}
	if req.Role != "" {
		if _, err := v.o.Reader.Role(ctx, req.Role); err != nil {
			return RestartResult{}, errs.Named("role", req.Role, err)
		}
	}
	sessions, err := v.o.Reader.Sessions(ctx, req.Role)
	if err != nil {
		return RestartResult{}, err
	}
	ctx, cancel := detach(ctx, opTimeout+time.Duration(len(sessions))*(grace+5*time.Second))
	defer cancel()
	res := RestartResult{Restarted: []Restarted{}}
	failed := 0
	for _, s := range sessions {
		if s.State == herd.StateStopped {
			continue
		}
		one := Restarted{Session: s.Name}
		r, err := v.Restart(ctx, RestartRequest{Name: s.Name, Grace: req.Grace})
		if err != nil {
			one.Error = err.Error()
			failed++
		} else if len(r.Restarted) > 0 {
			one.Incarnation = r.Restarted[0].Incarnation
		}
		res.Restarted = append(res.Restarted, one)
	}
	what := "all sessions"
	if req.Role != "" {
		what = "role " + req.Role
	}
	res.Message = fmt.Sprintf("%s: %d session(s) restarted", what, len(res.Restarted)-failed)
	if failed > 0 {
		res.Message += fmt.Sprintf(", %d failed", failed)
	}
	return res, nil
}

// rolloutTimeout bounds a whole rollout.
const rolloutTimeout = time.Hour

// rolloutRequest reads rollout's command arguments.
func rolloutRequest(role string, a map[string]string, from string) RolloutRequest {
	n, err := parseInt(a["max_unavailable"])
	if err != nil {
		n = 1
	}
	all, _ := strconv.ParseBool(a["all"])
	return RolloutRequest{Role: role, MaxUnavailable: n, Ready: a["ready"], MinReady: a["min_ready"], All: all, From: from}
}

// Rollout replaces a role's outdated sessions (every live one with All)
// a batch at a time, each new incarnation running before the next batch
// stops. A role declared on another host is rolled out by that host; a
// placed role by each host running its sessions in turn (this one
// first). A rollout that stopped part way answers with what it did and
// Error.
func (v *Verbs) Rollout(ctx context.Context, req RolloutRequest) (RolloutResult, error) {
	ready, err := parseDuration(req.Ready, 0, 30*time.Minute)
	if err != nil || req.Ready != "" && ready == 0 {
		return RolloutResult{}, errs.Badf("rollout: --timeout %q: want a positive duration up to 30m", req.Ready)
	}
	minReady, err := parseDuration(req.MinReady, 0, 10*time.Minute)
	if err != nil {
		return RolloutResult{}, errs.Badf("rollout: --min-ready %q: want a duration from 0 to 10m", req.MinReady)
	}
	args := map[string]string{"max_unavailable": strconv.Itoa(req.MaxUnavailable), "ready": req.Ready,
		"min_ready": req.MinReady, "all": strconv.FormatBool(req.All)}
	if host, err := v.roleHost(ctx, req.Role, req.From); err != nil || host != "" {
		if err != nil {
			return RolloutResult{}, err
		}
		return forward[RolloutResult](ctx, v, host, herd.CommandRollout, "role", req.Role, args, rolloutTimeout)
	}
	var others []string
	if req.From == "" {
		if others, err = v.placedElsewhere(ctx, req.Role); err != nil {
			return RolloutResult{}, err
		}
	}
	ctx, cancel := detach(ctx, rolloutTimeout)
	defer cancel()
	rep, err := v.o.Roles.Rollout(ctx, roles.RolloutRequest{Role: req.Role, MaxUnavailable: req.MaxUnavailable,
		Ready: ready, All: req.All, MinReady: minReady})
	if err != nil && (errs.IsBadInput(err) || len(rep.Replaced) == 0 && len(rep.Left) == 0) {
		return RolloutResult{}, err
	}
	res := RolloutResult{Replaced: rep.Replaced, Left: rep.Left}
	if res.Replaced == nil {
		res.Replaced = []api.RolloutStep{}
	}
	if err != nil {
		res.Error = err.Error()
	}
	// The other hosts of a placed role, one after the other, while all
	// goes well.
	for _, h := range others {
		if res.Error != "" {
			break
		}
		r, err := forward[RolloutResult](ctx, v, h, herd.CommandRollout, "role", req.Role, args, rolloutTimeout)
		if err != nil {
			res.Error = err.Error()
			break
		}
		res.Replaced = append(res.Replaced, r.Replaced...)
		res.Left = append(res.Left, r.Left...)
		res.Error = r.Error
	}
	switch {
	case res.Error != "":
		res.Message = fmt.Sprintf("role %s: rollout stopped after %d replaced; %d left outdated", req.Role, len(res.Replaced), len(res.Left))
	case len(res.Replaced) == 0:
		res.Message = fmt.Sprintf("role %s: nothing outdated", req.Role)
	default:
		res.Message = fmt.Sprintf("role %s: rolled out (%d session(s) replaced)", req.Role, len(res.Replaced))
	}
	return res, nil
}

// placedElsewhere returns, for a placed role, the other hosts that run
// its sessions, by name; nil for a role of one host.
func (v *Verbs) placedElsewhere(ctx context.Context, role string) ([]string, error) {
	ro, err := v.o.Reader.Role(ctx, role)
	if err != nil || !ro.Placed() {
		return nil, nil // a missing role is the slots' to name
	}
	sessions, err := v.o.Reader.Sessions(ctx, role)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range sessions {
		if s.Host != v.o.Host && s.State.CountsTowardReplicas() && !slices.Contains(out, s.Host) {
			out = append(out, s.Host)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Apply validates every role, then upserts them all (herd apply, herd
// run). Any daemon may apply: a role another host declared is refused by
// the slots, naming that host.
func (v *Verbs) Apply(ctx context.Context, req ApplyRequest) (ApplyResult, error) {
	changes, err := v.o.Roles.Apply(ctx, req.Roles, roles.ApplyOptions{Inherit: req.Inherit, DryRun: req.DryRun})
	if err != nil {
		return ApplyResult{}, err
	}
	n := 0
	for _, c := range changes {
		if c.Action != roles.RoleUnchanged {
			n++
		}
	}
	res := ApplyResult{Changes: changes}
	res.Message = fmt.Sprintf("%d role(s) applied, %d changed", len(changes), n)
	if req.DryRun {
		res.Message = fmt.Sprintf("%d role(s) would change (dry run: nothing applied)", n)
	}
	return res, nil
}

// Reap runs one reaper pass of this host now (each daemon reaps its own
// sessions), or a dry run that decides and reports but changes nothing.
func (v *Verbs) Reap(ctx context.Context, req ReapRequest) (api.ReapReport, error) {
	rep, err := v.o.Reaper.Pass(ctx, reaper.PassOptions{DryRun: req.DryRun})
	if err != nil {
		return rep, err
	}
	if !req.DryRun {
		v.o.Reaper.LogPass(rep)
	}
	return rep, nil
}
