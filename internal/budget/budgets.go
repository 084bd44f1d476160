package budget

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"herd"
	"herd/internal/loop"
	"herd/internal/slots"
	"herd/internal/status"
)

// Stopper takes sessions down through the one stop path (*slots.Slots in
// the daemon).
type Stopper interface {
	// BoundedStop stops a session once a stop slot is free; req.Guard
	// runs under the session's lock just before the first signal, and its
	// error keeps the session.
	BoundedStop(ctx context.Context, req slots.StopRequest) error
}

// Notifier tells a person that a role's budget is spent
// (*attention.Tracker in the daemon).
type Notifier interface {
	// BudgetReached delivers r on every notification channel, retrying
	// until delivered or ctx is done.
	BudgetReached(ctx context.Context, r Reached)
}

// Reached is one role's budget spent for the day.
type Reached struct {
	Role   string
	Host   string
	Spent  float64
	Budget float64
	Hard   bool
	// Until is when the role launches again: the next local midnight.
	Until time.Time
}

// Options configure Budgets.
type Options struct {
	Status *status.Manager
	// Spending is the usage ledger; nil turns budgets off.
	Spending Spending
	Stopper  Stopper
	// Notifier, when set, is told once per role and day.
	Notifier Notifier
	// Now is the clock (nil: time.Now); its location is the one whose
	// midnight starts a day.
	Now func() time.Time
	// Tick is the period of the looks; a session's activity changing
	// (its turn ending) asks for one at once.
	Tick time.Duration
	Log  *slog.Logger
}

// Budgets holds the roles of this host to their daily budgets.
type Budgets struct {
	o     Options
	kick  chan struct{}
	group loop.Group

	mu sync.Mutex // guards the fields below
	// told holds, by role, the day whose spent budget was told.
	told map[string]time.Time
	// stopping holds the sessions whose budget stop is under way.
	stopping map[string]bool
}

var _ slots.Gate = (*Budgets)(nil)

// New returns Budgets; Run starts it.
func New(o Options) *Budgets {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = 10 * time.Second
	}
	b := &Budgets{o: o, kick: make(chan struct{}, 1), told: map[string]time.Time{}, stopping: map[string]bool{}}
	b.group.Log = o.Log
	return b
}

// Kick asks for a look now, without blocking.
func (b *Budgets) Kick() { loop.Wake(b.kick) }

// Run looks every Tick and whenever a session's activity changes, until
// ctx is done; it returns once the stops it began are done.
func (b *Budgets) Run(ctx context.Context) {
	defer b.group.Wait()
	if b.o.Spending == nil {
		return
	}
	changes, cancel := b.o.Status.Subscribe()
	defer cancel()
	b.group.Go("budget changes", func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ch, ok := <-changes:
				if !ok {
					return
				}
				if ch.What.Has(status.ChangeActivity) {
					b.Kick()
				}
			}
		}
	})
	loop.Loop{Name: "budget", Log: b.o.Log, Every: b.o.Tick, Trigger: b.kick}.Run(ctx, func(ctx context.Context) time.Duration {
		if err := b.Once(ctx); err != nil && ctx.Err() == nil {
			b.o.Log.Error("budget: look", "err", err)
		}
		return 0
	})
}

// LaunchHeld holds a launch of role r while its budget for now's day is
// spent: until the next local midnight.
func (b *Budgets) LaunchHeld(r herd.Role, now time.Time) (until time.Time, why string) {
	if b.o.Spending == nil || r.DailyBudgetUSD <= 0 {
		return time.Time{}, ""
	}
	now = now.In(b.o.Now().Location())
	spent := b.o.Spending.RoleCostSince(r.Name, DayStart(now))
	if !Over(spent, r.DailyBudgetUSD) {
		return time.Time{}, ""
	}
	return NextDay(now), fmt.Sprintf("role %s spent $%.2f of its $%.2f budget today", r.Name, spent, r.DailyBudgetUSD)
}

// Once is one look: each role of this host whose budget today is spent is
// told (once a day) and its live sessions stopped as Decide says.
func (b *Budgets) Once(ctx context.Context) error {
	if b.o.Spending == nil {
		return nil
	}
	now := b.o.Now()
	roles, sessions, _, err := b.o.Status.Listing(ctx)
	if err != nil {
		return err
	}
	host := b.o.Status.Host()
	for _, r := range roles {
		if r.DailyBudgetUSD <= 0 {
			continue
		}
		spent := b.o.Spending.RoleCostSince(r.Name, DayStart(now))
		if !Over(spent, r.DailyBudgetUSD) {
			continue
		}
		reached := Reached{Role: r.Name, Host: host, Spent: spent, Budget: r.DailyBudgetUSD, Hard: r.BudgetHard, Until: NextDay(now)}
		b.tell(ctx, reached, DayStart(now))
		for _, s := range sessions {
			if s.Role != r.Name || s.Host != host || !s.State.Live() {
				continue
			}
			if Decide(spent, r.DailyBudgetUSD, r.BudgetHard, s.Activity) == Stop {
				b.stop(ctx, s, reached)
			}
		}
	}
	return nil
}

// tell has the notifier tell r once for day.
func (b *Budgets) tell(ctx context.Context, r Reached, day time.Time) {
	b.mu.Lock()
	done := b.told[r.Role].Equal(day)
	b.told[r.Role] = day
	b.mu.Unlock()
	if done {
		return
	}
	b.o.Log.Warn("budget spent: the role launches nothing more today", "role", r.Role, "spent_usd", r.Spent, "daily_budget_usd", r.Budget, "until", r.Until)
	if b.o.Notifier != nil {
		b.group.Go("budget notification", func() { b.o.Notifier.BudgetReached(ctx, r) })
	}
}

// errInTurn keeps a session whose turn began between the look and its
// stop: it is stopped at its next idle moment instead.
var errInTurn = errors.New("budget: the session is in a turn")

// stop stops session s, once at a time, through the one stop path: not a
// crash, no replica dropped, so the slot launches again (resuming its
// conversation) once the budget is new. Unless the budget is hard, the
// stop is called off when a turn began meanwhile.
func (b *Budgets) stop(ctx context.Context, s herd.Session, r Reached) {
	b.mu.Lock()
	if b.stopping[s.Name] {
		b.mu.Unlock()
		return
	}
	b.stopping[s.Name] = true
	b.mu.Unlock()
	b.group.Go("budget stop", func() {
		defer func() {
			b.mu.Lock()
			delete(b.stopping, s.Name)
			b.mu.Unlock()
		}()
		req := slots.StopRequest{
			Name: s.Name, Reason: herd.ReasonBudget, Incarnation: s.Incarnation,
			Message: fmt.Sprintf("role %s spent $%.2f of its $%.2f budget today; resumes %s", r.Role, r.Spent, r.Budget, r.Until.Format(time.RFC3339)),
			Data: map[string]any{
				"spent_usd": r.Spent, "daily_budget_usd": r.Budget, "budget_hard": r.Hard,
				"activity": string(s.Activity), "resumes_at": r.Until.UTC().Format(time.RFC3339),
			},
		}
		if !r.Hard {
			req.Guard = func(cur herd.Session) error {
				if !Between(cur.Activity) {
					return errInTurn
				}
				return nil
			}
		}
		err := b.o.Stopper.BoundedStop(ctx, req)
		switch {
		case err == nil:
			b.o.Log.Info("stopped for its role's budget", "session", s.Name, "role", r.Role, "spent_usd", r.Spent, "hard", r.Hard)
		case errors.Is(err, errInTurn), errors.Is(err, slots.ErrAlreadyStopped):
		default:
			if ctx.Err() == nil {
				b.o.Log.Error("budget: stop", "session", s.Name, "err", err)
			}
		}
	})
}
