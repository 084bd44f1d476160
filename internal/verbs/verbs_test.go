package verbs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
	"herd/internal/commands"
	"herd/internal/errs"
	"herd/internal/reaper"
	"herd/internal/roles"
	"herd/internal/slots"
	"herd/internal/store"

	"golang.org/x/sys/unix"
)

// fakeSlots records the slot operations asked of it.
type fakeSlots struct {
	calls []string
	stops []slots.StopRequest
	// err is returned by every operation when set.
	err     error
	rearmed bool
	rollout roles.RolloutReport
	kicks   int
}

var (
	_ SessionSlots = (*fakeSlots)(nil)
	_ RoleSlots    = (*fakeSlots)(nil)
	_ Kicker       = (*fakeSlots)(nil)
)

func (f *fakeSlots) Stop(ctx context.Context, req slots.StopRequest) error {
	f.calls = append(f.calls, "stop "+req.Name)
	f.stops = append(f.stops, req)
	return f.err
}
func (f *fakeSlots) Resume(ctx context.Context, name string) error {
	f.calls = append(f.calls, "resume "+name)
	return f.err
}
func (f *fakeSlots) Restart(ctx context.Context, req slots.RestartRequest) (string, error) {
	f.calls = append(f.calls, "restart "+req.Name)
	if f.err != nil {
		return "", f.err
	}
	return "inc-" + req.Name, nil
}
func (f *fakeSlots) Reset(ctx context.Context, name string) (bool, error) {
	f.calls = append(f.calls, "reset "+name)
	return f.rearmed, f.err
}
func (f *fakeSlots) Signal(ctx context.Context, name string, sig unix.Signal) (int, error) {
	f.calls = append(f.calls, "signal "+name+" "+unix.SignalName(sig))
	return 42, f.err
}
func (f *fakeSlots) Apply(ctx context.Context, rs []herd.Role, o roles.ApplyOptions) ([]roles.RoleChange, error) {
	f.calls = append(f.calls, "apply")
	var out []roles.RoleChange
	for _, r := range rs {
		out = append(out, roles.RoleChange{Role: r.Name, Action: roles.RoleCreated})
	}
	return out, f.err
}
func (f *fakeSlots) Scale(ctx context.Context, name string, n int) error {
	f.calls = append(f.calls, "scale "+name)
	return f.err
}
func (f *fakeSlots) DeleteRole(ctx context.Context, name string) (int, error) {
	f.calls = append(f.calls, "delete "+name)
	return 2, f.err
}
func (f *fakeSlots) Rollout(ctx context.Context, req roles.RolloutRequest) (roles.RolloutReport, error) {
	f.calls = append(f.calls, "rollout "+req.Role)
	return f.rollout, f.err
}
func (f *fakeSlots) Archive(ctx context.Context, name string) error {
	f.calls = append(f.calls, "archive "+name)
	return f.err
}
func (f *fakeSlots) Kick() { f.kicks++ }

// fakeReader serves rows from maps.
type fakeReader struct {
	sessions map[string]herd.Session
	roles    map[string]herd.Role
	stale    map[string]bool
}

var _ Reader = (*fakeReader)(nil)

func (r *fakeReader) Session(ctx context.Context, name string) (herd.Session, error) {
	s, ok := r.sessions[name]
	if !ok {
		return s, store.ErrNotFound
	}
	return s, nil
}
func (r *fakeReader) Role(ctx context.Context, name string) (herd.Role, error) {
	ro, ok := r.roles[name]
	if !ok {
		return ro, store.ErrNotFound
	}
	return ro, nil
}
func (r *fakeReader) Incarnation(ctx context.Context, id string) (herd.Incarnation, error) {
	return herd.Incarnation{ID: id}, nil
}
func (r *fakeReader) Sessions(ctx context.Context, role string) ([]herd.Session, error) {
	var out []herd.Session
	for _, name := range slices.Sorted(maps.Keys(r.sessions)) {
		if s := r.sessions[name]; role == "" || s.Role == role {
			out = append(out, s)
		}
	}
	return out, nil
}
func (r *fakeReader) Stale(ctx context.Context, host string) (bool, error) { return r.stale[host], nil }

// forwardFunc is a Forwarder.
type forwardFunc func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error)

func (f forwardFunc) Forward(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
	return f(ctx, c, timeout)
}

// fakeReaper counts passes.
type fakeReaper struct{ passes, logged int }

func (r *fakeReaper) Pass(ctx context.Context, o reaper.PassOptions) (api.ReapReport, error) {
	r.passes++
	return api.ReapReport{DryRun: o.DryRun}, nil
}
func (r *fakeReaper) LogPass(api.ReapReport) { r.logged++ }

// fleet is two hosts' rows: w-0 and w-1 on a, w-2 and role x on b.
func fleet() *fakeReader {
	return &fakeReader{
		sessions: map[string]herd.Session{
			"w-0": {Name: "w-0", Role: "w", Index: 0, Host: "a", State: herd.StateRunning},
			"w-1": {Name: "w-1", Role: "w", Index: 1, Host: "a", State: herd.StateStopped},
			"w-2": {Name: "w-2", Role: "w", Index: 2, Host: "b", State: herd.StateRunning},
			"x-0": {Name: "x-0", Role: "x", Index: 0, Host: "b", State: herd.StateRunning},
		},
		roles: map[string]herd.Role{
			"w": {Name: "w", Host: "a", Replicas: 3},
			"x": {Name: "x", Host: "b", Replicas: 1},
		},
		stale: map[string]bool{},
	}
}

// host returns the verbs of host name over rows, with its own slots;
// forward carries commands to other hosts.
func host(name string, rows *fakeReader, forward Forwarder) (*Verbs, *fakeSlots) {
	sl := &fakeSlots{}
	return New(Options{Host: name, Sessions: sl, Roles: sl, Kicker: sl, Reaper: &fakeReaper{}, Reader: rows, Forward: forward, HostTimeout: 3 * time.Second}), sl
}

// noForward fails a test that forwards.
func noForward(t *testing.T) Forwarder {
	return forwardFunc(func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
		t.Errorf("expected nothing forwarded, got %+v", c)
		return "", errors.New("no forwarding")
	})
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	v, sl := host("a", fleet(), noForward(t))
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"stop grace", func() error { _, err := v.Stop(ctx, StopRequest{Name: "w-0", Grace: "soon"}); return err }, `stop: --grace "soon": want a positive duration`},
		{"stop grace too long", func() error { _, err := v.Stop(ctx, StopRequest{Name: "w-2", Grace: "2h"}); return err }, "stop: --grace 2h: at most 1h"},
		{"restart grace", func() error { _, err := v.Restart(ctx, RestartRequest{Name: "w-2", Grace: "-1s"}); return err }, `restart: --grace "-1s"`},
		{"restart many grace", func() error { _, err := v.RestartMany(ctx, RestartManyRequest{Grace: "0s"}); return err }, `restart: --grace "0s"`},
		{"restart many role", func() error { _, err := v.RestartMany(ctx, RestartManyRequest{Role: "nope"}); return err }, "role nope"},
		{"signal", func() error { _, err := v.Signal(ctx, SignalRequest{Name: "w-2", Signal: "BOGUS"}); return err }, `signal w-2: signal "BOGUS": not a signal name`},
		{"signal number", func() error { _, err := v.Signal(ctx, SignalRequest{Name: "w-0", Signal: "65"}); return err }, "signal w-0: signal 65: want 1 to 64"},
		{"scale negative", func() error { _, err := v.Scale(ctx, ScaleRequest{Role: "x", Replicas: -1}); return err }, "scale: replicas must be a number >= 0"},
		{"scale too many", func() error { _, err := v.Scale(ctx, ScaleRequest{Role: "x", Replicas: 1 << 20}); return err }, "at most"},
		{"rollout ready", func() error { _, err := v.Rollout(ctx, RolloutRequest{Role: "x", Ready: "0s"}); return err }, `rollout: --timeout "0s"`},
		{"rollout ready too long", func() error { _, err := v.Rollout(ctx, RolloutRequest{Role: "x", Ready: "1h"}); return err }, `rollout: --timeout "1h"`},
		{"rollout min ready", func() error { _, err := v.Rollout(ctx, RolloutRequest{Role: "x", MinReady: "-1s"}); return err }, `rollout: --min-ready "-1s"`},
	}
	for _, tt := range tests {
		err := tt.run()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("[%s] expected an error with %q … got %v", tt.name, tt.want, err)
		}
		if tt.name != "restart many role" && !errs.IsBadInput(err) {
			t.Errorf("[%s] expected a BadInput … got %T", tt.name, err)
		}
	}
	if len(sl.calls) != 0 {
		t.Errorf("expected no slot operation for invalid requests, got %v", sl.calls)
	}
}

func TestLocalMessages(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		slotErr error
		rearmed bool
		run     func(v *Verbs) (string, error)
		want    string
		wantErr string
		calls   []string
	}{
		{name: "stop", run: func(v *Verbs) (string, error) { r, err := v.Stop(ctx, StopRequest{Name: "w-0"}); return r.Message, err },
			want: "session w-0 stopped", calls: []string{"stop w-0"}},
		{name: "stop raced", slotErr: slots.ErrAlreadyStopped,
			run:  func(v *Verbs) (string, error) { r, err := v.Stop(ctx, StopRequest{Name: "w-0"}); return r.Message, err },
			want: "session w-0 already stopped", calls: []string{"stop w-0"}},
		{name: "stop missing", slotErr: store.ErrNotFound,
			run: func(v *Verbs) (string, error) {
				r, err := v.Stop(ctx, StopRequest{Name: "nope"})
				return r.Message, err
			},
			wantErr: "session nope: not found", calls: []string{"stop nope"}},
		{name: "resume", run: func(v *Verbs) (string, error) {
			r, err := v.Resume(ctx, SessionRequest{Name: "w-1"})
			return r.Message, err
		},
			want: "session w-1 resumed", calls: []string{"resume w-1"}},
		{name: "archive", run: func(v *Verbs) (string, error) {
			r, err := v.Archive(ctx, SessionRequest{Name: "w-0"})
			return r.Message, err
		},
			want: "session w-0 archived", calls: []string{"archive w-0"}},
		{name: "restart", run: func(v *Verbs) (string, error) {
			r, err := v.Restart(ctx, RestartRequest{Name: "w-0"})
			return r.Message, err
		},
			want: "session w-0 restarted (incarnation inc-w-0)", calls: []string{"restart w-0"}},
		{name: "reset", run: func(v *Verbs) (string, error) {
			r, err := v.Reset(ctx, SessionRequest{Name: "w-0"})
			return r.Message, err
		},
			want: "session w-0: crash count reset", calls: []string{"reset w-0"}},
		{name: "reset rearmed", rearmed: true,
			run: func(v *Verbs) (string, error) {
				r, err := v.Reset(ctx, SessionRequest{Name: "w-0"})
				return r.Message, err
			},
			want: "session w-0: crash count reset; it was failed and relaunches now", calls: []string{"reset w-0"}},
		{name: "signal", run: func(v *Verbs) (string, error) {
			r, err := v.Signal(ctx, SignalRequest{Name: "w-0", Signal: "hup"})
			return r.Message, err
		},
			want: "SIGHUP sent to session w-0 (pid 42)", calls: []string{"signal w-0 SIGHUP"}},
		{name: "scale", run: func(v *Verbs) (string, error) {
			r, err := v.Scale(ctx, ScaleRequest{Role: "w", Replicas: 5})
			return r.Message, err
		},
			want: "role w scaled to 5", calls: []string{"scale w"}},
		{name: "delete", run: func(v *Verbs) (string, error) {
			r, err := v.DeleteRole(ctx, RoleRequest{Role: "w"})
			return r.Message, err
		},
			want: "role w deleted (2 session(s) stopped)", calls: []string{"delete w"}},
		{name: "rollout nothing", run: func(v *Verbs) (string, error) {
			r, err := v.Rollout(ctx, RolloutRequest{Role: "w", MaxUnavailable: 1})
			return r.Message, err
		},
			want: "role w: nothing outdated", calls: []string{"rollout w"}},
		{name: "apply", run: func(v *Verbs) (string, error) {
			r, err := v.Apply(ctx, ApplyRequest{Roles: []herd.Role{{Name: "y"}}})
			return r.Message, err
		}, want: "1 role(s) applied, 1 changed", calls: []string{"apply"}},
		{name: "apply dry", run: func(v *Verbs) (string, error) {
			r, err := v.Apply(ctx, ApplyRequest{Roles: []herd.Role{{Name: "y"}}, DryRun: true})
			return r.Message, err
		}, want: "1 role(s) would change (dry run: nothing applied)", calls: []string{"apply"}},
		{name: "restart all here and there", run: func(v *Verbs) (string, error) {
			r, err := v.RestartMany(ctx, RestartManyRequest{Role: "w"})
			return r.Message, err
		}, want: "role w: 1 session(s) restarted, 1 failed", calls: []string{"restart w-0"}},
	}
	for _, tt := range tests {
		v, sl := host("a", fleet(), forwardFunc(func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
			return "", &commands.FailedError{Host: c.Host, Result: "refused"}
		}))
		sl.err, sl.rearmed = tt.slotErr, tt.rearmed
		got, err := tt.run(v)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("[%s] expected an error with %q … got %q, %v", tt.name, tt.wantErr, got, err)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("[%s] expected %q … got %q, %v", tt.name, tt.want, got, err)
		}
		if diff := cmp.Diff(tt.calls, sl.calls); diff != "" {
			t.Errorf("[%s] slot operations (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestStopKeepsReplicaSemantics: a local stop drops the replica through
// the one stop path and wakes the reconciler.
func TestStopKeepsReplicaSemantics(t *testing.T) {
	v, sl := host("a", fleet(), noForward(t))
	if _, err := v.Stop(context.Background(), StopRequest{Name: "w-0", Grace: "5s"}); err != nil {
		t.Fatal(err)
	}
	want := []slots.StopRequest{{Name: "w-0", Reason: herd.ReasonUser, DropReplica: true, Message: "stopped by user", Grace: 5 * time.Second}}
	if diff := cmp.Diff(want, sl.stops); diff != "" {
		t.Errorf("stop request (-want +got):\n%s", diff)
	}
	if sl.kicks != 1 {
		t.Errorf("expected one kick, got %d", sl.kicks)
	}
}

// TestAcrossHosts: a verb typed on host a for host b's session or role is
// forwarded to b, which runs the same verb function through Execute: the
// same slot operation, the same message (marked with b) and the same
// structured result as on b itself.
func TestAcrossHosts(t *testing.T) {
	ctx := context.Background()
	rows := fleet()
	b, bSlots := host("b", rows, noForward(t))
	var sent []herd.Command
	a, aSlots := host("a", rows, forwardFunc(func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
		sent = append(sent, c)
		return b.Execute(ctx, c)
	}))
	tests := []struct {
		name  string
		run   func() (string, error)
		want  string
		call  string
		check func(t *testing.T)
	}{
		{"stop", func() (string, error) {
			r, err := a.Stop(ctx, StopRequest{Name: "w-2", Grace: "3s"})
			return r.Message, err
		},
			"session w-2 stopped (on host b)", "stop w-2", func(t *testing.T) {
				want := slots.StopRequest{Name: "w-2", Reason: herd.ReasonUser, DropReplica: true, Message: "stopped by user (via host a)", Grace: 3 * time.Second}
				if diff := cmp.Diff(want, bSlots.stops[len(bSlots.stops)-1]); diff != "" {
					t.Errorf("[stop] b's stop request (-want +got):\n%s", diff)
				}
			}},
		{"resume", func() (string, error) { r, err := a.Resume(ctx, SessionRequest{Name: "w-2"}); return r.Message, err },
			"session w-2 resumed (on host b)", "resume w-2", nil},
		{"archive", func() (string, error) { r, err := a.Archive(ctx, SessionRequest{Name: "w-2"}); return r.Message, err },
			"session w-2 archived (on host b)", "archive w-2", nil},
		{"restart", func() (string, error) {
			r, err := a.Restart(ctx, RestartRequest{Name: "w-2"})
			if err == nil && (len(r.Restarted) != 1 || r.Restarted[0].Incarnation != "inc-w-2" || r.Host != "b") {
				t.Errorf("[restart] expected b's structured result, got %+v", r)
			}
			return r.Message, err
		}, "session w-2 restarted (incarnation inc-w-2) (on host b)", "restart w-2", nil},
		{"reset", func() (string, error) { r, err := a.Reset(ctx, SessionRequest{Name: "w-2"}); return r.Message, err },
			"session w-2: crash count reset (on host b)", "reset w-2", nil},
		{"signal", func() (string, error) {
			r, err := a.Signal(ctx, SignalRequest{Name: "w-2", Signal: "USR1"})
			if err == nil && r.PID != 42 {
				t.Errorf("[signal] expected b's pid, got %+v", r)
			}
			return r.Message, err
		}, "SIGUSR1 sent to session w-2 (pid 42) (on host b)", "signal w-2 SIGUSR1", nil},
		{"scale", func() (string, error) {
			r, err := a.Scale(ctx, ScaleRequest{Role: "x", Replicas: 2})
			return r.Message, err
		},
			"role x scaled to 2 (on host b)", "scale x", nil},
		{"delete", func() (string, error) {
			r, err := a.DeleteRole(ctx, RoleRequest{Role: "x"})
			if err == nil && r.Stopped != 2 {
				t.Errorf("[delete] expected b's count, got %+v", r)
			}
			return r.Message, err
		}, "role x deleted (2 session(s) stopped) (on host b)", "delete x", nil},
		{"rollout", func() (string, error) {
			r, err := a.Rollout(ctx, RolloutRequest{Role: "x", MaxUnavailable: 1})
			return r.Message, err
		},
			"role x: nothing outdated (on host b)", "rollout x", nil},
	}
	for _, tt := range tests {
		got, err := tt.run()
		if err != nil || got != tt.want {
			t.Errorf("[%s] expected %q … got %q, %v", tt.name, tt.want, got, err)
		}
		if n := len(bSlots.calls); n == 0 || bSlots.calls[n-1] != tt.call {
			t.Errorf("[%s] expected b to run %q … got %v", tt.name, tt.call, bSlots.calls)
		}
		if tt.check != nil {
			tt.check(t)
		}
	}
	if len(aSlots.calls) != 0 {
		t.Errorf("expected a to act on none of b's sessions, got %v", aSlots.calls)
	}
	for _, c := range sent {
		if c.Host != "b" || c.From != "a" {
			t.Errorf("expected every command from a to b, got %+v", c)
		}
	}
}

// TestExecuteNeverForwardsAgain: a command whose session moved on meanwhile
// is refused by the slots of the host it reached, never sent on.
func TestExecuteNeverForwardsAgain(t *testing.T) {
	b, bSlots := host("b", fleet(), noForward(t))
	bSlots.err = &slots.OtherHostError{What: "session", Name: "w-0", Host: "a"}
	_, err := b.Execute(context.Background(), herd.Command{Host: "b", From: "c", Kind: herd.CommandStop, Session: "w-0"})
	if err == nil || !strings.Contains(err.Error(), "runs on host a") {
		t.Errorf("expected b's refusal naming host a, got %v", err)
	}
	if _, err := b.Execute(context.Background(), herd.Command{Kind: "explode", Session: "w-0"}); err == nil || !strings.Contains(err.Error(), `unknown command "explode"`) {
		t.Errorf("expected an unknown command refused, got %v", err)
	}
}

// TestStaleHost: a verb for a stale host's session is refused at once,
// naming the host; nothing is queued.
func TestStaleHost(t *testing.T) {
	rows := fleet()
	rows.stale["b"] = true
	a, _ := host("a", rows, noForward(t))
	_, err := a.Restart(context.Background(), RestartRequest{Name: "w-2"})
	var down *HostDownError
	if !errors.As(err, &down) || !strings.Contains(err.Error(), "belongs to host b, whose daemon is not answering (no heartbeat within 3s)") {
		t.Errorf("expected a HostDownError naming b, got %v", err)
	}
}

// TestLegacyCommands: rows an older daemon wrote (inject's and scale's
// arguments, a plain-text answer) are still understood.
func TestLegacyCommands(t *testing.T) {
	ctx := context.Background()
	b, bSlots := host("b", fleet(), noForward(t))
	if res, err := b.Execute(ctx, herd.Command{Kind: herd.CommandScale, Session: "x", Args: map[string]string{"replicas": "3"}, From: "a"}); err != nil || res != "role x scaled to 3" {
		t.Errorf("expected scale executed, got %q, %v", res, err)
	}
	if _, err := b.Execute(ctx, herd.Command{Kind: herd.CommandScale, Session: "x", Args: map[string]string{"replicas": "many"}, From: "a"}); err == nil {
		t.Errorf("expected a bad replica count refused")
	}
	if diff := cmp.Diff([]string{"scale x"}, bSlots.calls); diff != "" {
		t.Errorf("b's operations (-want +got):\n%s", diff)
	}
	a, _ := host("a", fleet(), forwardFunc(func(ctx context.Context, c herd.Command, timeout time.Duration) (string, error) {
		return "session w-2 stopped", nil
	}))
	if r, err := a.Stop(ctx, StopRequest{Name: "w-2"}); err != nil || r.Message != "session w-2 stopped (on host b)" {
		t.Errorf("expected a plain answer taken as the message, got %+v, %v", r, err)
	}
}

// TestReap: a pass is logged unless it is a dry run.
func TestReap(t *testing.T) {
	rp := &fakeReaper{}
	v := New(Options{Host: "a", Reaper: rp})
	for _, dry := range []bool{true, false} {
		if rep, err := v.Reap(context.Background(), ReapRequest{DryRun: dry}); err != nil || rep.DryRun != dry {
			t.Errorf("[dry=%v] expected a pass, got %+v, %v", dry, rep, err)
		}
	}
	if rp.passes != 2 || rp.logged != 1 {
		t.Errorf("expected 2 passes, 1 logged, got %d, %d", rp.passes, rp.logged)
	}
}

// TestRolloutPlaced: a placed role is rolled out by each host that runs
// its sessions, this one first, the others through Execute; a stale host
// stops the rollout there, saying so.
func TestRolloutPlaced(t *testing.T) {
	ctx := context.Background()
	rows := fleet()
	rows.roles["sp"] = herd.Role{Name: "sp", Replicas: 3, Spread: true}
	rows.sessions["sp-0"] = herd.Session{Name: "sp-0", Role: "sp", Index: 0, Host: "a", State: herd.StateRunning}
	rows.sessions["sp-1"] = herd.Session{Name: "sp-1", Role: "sp", Index: 1, Host: "b", State: herd.StateRunning}
	rows.sessions["sp-2"] = herd.Session{Name: "sp-2", Role: "sp", Index: 2, Host: "c", State: herd.StateRunning}
	lister := &fakeReader{sessions: rows.sessions, roles: rows.roles, stale: rows.stale}
	b, bSlots := host("b", lister, noForward(t))
	c, cSlots := host("c", lister, noForward(t))
	bSlots.rollout = roles.RolloutReport{Role: "sp", Replaced: []api.RolloutStep{{Session: "sp-1", From: "1", To: "2"}}}
	cSlots.rollout = roles.RolloutReport{Role: "sp", Replaced: []api.RolloutStep{{Session: "sp-2", From: "1", To: "2"}}}
	a, aSlots := host("a", lister, forwardFunc(func(ctx context.Context, cmd herd.Command, timeout time.Duration) (string, error) {
		if cmd.Host == "b" {
			return b.Execute(ctx, cmd)
		}
		return c.Execute(ctx, cmd)
	}))
	aSlots.rollout = roles.RolloutReport{Role: "sp", Replaced: []api.RolloutStep{{Session: "sp-0", From: "1", To: "2"}}}

	res, err := a.Rollout(ctx, RolloutRequest{Role: "sp", MaxUnavailable: 1})
	if err != nil || res.Message != "role sp: rolled out (3 session(s) replaced)" || len(res.Replaced) != 3 || res.Replaced[2].Session != "sp-2" {
		t.Errorf("expected every host's share replaced, got %+v, %v", res, err)
	}
	lister.stale["c"] = true
	res, err = a.Rollout(ctx, RolloutRequest{Role: "sp", MaxUnavailable: 1})
	if err != nil || res.Message != "role sp: rollout stopped after 2 replaced; 0 left outdated" || !strings.Contains(res.Error, "host c") {
		t.Errorf("expected the rollout stopped at stale host c, got %+v, %v", res, err)
	}
	if got := strings.Join(bSlots.calls, ","); got != "rollout sp,rollout sp" {
		t.Errorf("expected b to roll out its share twice, got %s", got)
	}
}
