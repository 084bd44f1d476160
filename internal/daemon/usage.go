package daemon

import (
	"os"
	"strconv"
	"sync"
	"time"

	"herd/internal/config"
	"herd/internal/usage"
)

// newLedger builds the usage ledger: this host's agents' transcripts and
// exec output, priced by the table [prices] overrides (as reloaded).
func (d *Daemon) newLedger() *usage.Ledger {
	o := usage.Options{
		Store: d.status.Store(), Host: d.host, Log: d.log,
		Prices:   d.prices(),
		Interval: ledgerInterval(),
		Stdout: func(session, incarnation string) string {
			out, _ := d.exec.Paths(session, incarnation)
			return out
		},
		AccountOf:      d.AccountOf,
		HookTranscript: d.watchdog.HookTranscript,
	}
	if d.metrics != nil {
		o.Counter = d.metrics
	}
	return usage.New(o)
}

// prices returns the price table of the config in force, built again
// only when a reload swapped the config.
func (d *Daemon) prices() func() usage.Prices {
	var (
		mu    sync.Mutex
		from  *config.Config
		table usage.Prices
	)
	return func() usage.Prices {
		cfg := d.live.Load()
		mu.Lock()
		defer mu.Unlock()
		if cfg != from || table == nil {
			from, table = cfg, usage.PricesFrom(cfg.Prices)
		}
		return table
	}
}

// ledgerInterval is how often the ledger reads: HERD_USAGE_INTERVAL (a
// Go duration or seconds) for tests, else the ledger's default.
func ledgerInterval() time.Duration {
	v := os.Getenv("HERD_USAGE_INTERVAL")
	if v == "" {
		return 0
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
