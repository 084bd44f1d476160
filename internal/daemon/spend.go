package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"herd"
	"herd/internal/accounts"
	"herd/internal/attention"
	"herd/internal/budget"
	"herd/internal/slots"
)

// EnvSpendFile names a JSON file of spends by role ({"worker": 4.2}, US
// dollars today) the budgets read instead of the usage ledger: a way to
// drive budgets by hand, whatever the agents spent.
const EnvSpendFile = "HERD_SPEND_FILE"

// newSpend builds what rate limits and budgets need before the slots: the
// account holds and the budgets (a gate each of slots'). The budgets stop
// through slots and tell through attention, both built after them.
func (d *Daemon) newSpend(o Options) {
	d.holds = accounts.NewHolds(func() time.Duration { return d.live.Load().AutoContinue.Spacing })
	spending := o.Spending
	if spending == nil {
		spending = lateLedger{d}
		if path := os.Getenv(EnvSpendFile); path != "" {
			spending = &fileSpending{path: path, log: d.log}
		}
	}
	d.budgets = budget.New(budget.Options{
		Status: d.status, Spending: spending, Stopper: lateSlots{d}, Notifier: budgetNotifier{d},
		Tick: min(10*time.Second, max(time.Second, d.cfg.Probe.Interval)), Log: d.log,
	})
}

// AccountOf returns the account of the role named role (accounts.Of over
// the roles the writer holds now): what the usage ledger rolls spend up
// by.
func (d *Daemon) AccountOf(role string) string {
	return accounts.Resolver{Roles: func(name string) (herd.Role, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Probe.Timeout)
		defer cancel()
		r, err := d.status.Role(ctx, name)
		return r, err == nil
	}}.AccountOf(role)
}

// lateLedger is the daemon's usage ledger, built after the budgets: what
// a role spent is what its agents recorded, priced.
type lateLedger struct{ d *Daemon }

func (l lateLedger) RoleCostSince(role string, since time.Time) float64 {
	if l.d.usage == nil {
		return 0
	}
	return l.d.usage.RoleCostSince(role, since)
}

// lateSlots is the daemon's slots, built after the budgets.
type lateSlots struct{ d *Daemon }

func (l lateSlots) BoundedStop(ctx context.Context, req slots.StopRequest) error {
	return l.d.slots.BoundedStop(ctx, req)
}

// budgetNotifier tells a spent budget through attention.
type budgetNotifier struct{ d *Daemon }

func (n budgetNotifier) BudgetReached(ctx context.Context, r budget.Reached) {
	n.d.attention.Announce(ctx, attention.BudgetMessage(r.Role, r.Host, r.Spent, r.Budget, r.Hard, r.Until, time.Now()))
}

// fileSpending reads spends by role from a JSON file, again when it
// changed.
type fileSpending struct {
	path string
	log  *slog.Logger

	mu    sync.Mutex // guards the fields below
	mtime time.Time
	size  int64
	spent map[string]float64
}

var _ budget.Spending = (*fileSpending)(nil)

// RoleCostSince returns the file's spend of role; since is not read (the
// file holds today's). A file missing or garbled spends nothing.
func (f *fileSpending) RoleCostSince(role string, _ time.Time) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err != nil {
		return 0
	}
	if !st.ModTime().Equal(f.mtime) || st.Size() != f.size {
		f.mtime, f.size, f.spent = st.ModTime(), st.Size(), nil
		b, err := os.ReadFile(f.path)
		if err == nil {
			err = json.Unmarshal(b, &f.spent)
		}
		if err != nil {
			f.log.Warn("budget: spend file skipped", "path", f.path, "err", fmt.Errorf("read: %w", err))
			f.spent = nil
		}
	}
	return f.spent[role]
}
