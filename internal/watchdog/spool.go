package watchdog

import (
	"context"

	"herd/internal/api"
	"herd/internal/spool"
)

// newIngester returns the ingester of the hook spool: reports `herd hook`
// wrote while no daemon answered, applied in order once it does.
func (w *Watchdog) newIngester() *spool.Ingester {
	return &spool.Ingester{
		Dir: spool.Dir(w.o.StateDir),
		Apply: func(ctx context.Context, rep api.ActivityReport) error {
			_, err := w.ApplyReport(ctx, rep, true)
			return err
		},
		Log: w.o.Log,
	}
}

// IngestAll ingests every spool file now, leftovers of a crash first.
func (w *Watchdog) IngestAll(ctx context.Context) { w.spool.IngestAll(ctx) }
