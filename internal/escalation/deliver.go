package escalation

import (
	"errors"
	"fmt"
	"time"
)

// Delivery defaults.
const (
	// CommandTimeout bounds one run of the notifier command; a command
	// still running then is killed with its whole process group.
	CommandTimeout = 10 * time.Second
	// WebhookTimeout bounds one webhook request.
	WebhookTimeout = 10 * time.Second
	// BackoffMin is the delay before the first retry of a failed delivery;
	// it doubles per failed round up to BackoffMax.
	BackoffMin = time.Second
	// BackoffMax caps the retry delay.
	BackoffMax = 5 * time.Minute
)

// Backoff is the delay after the attempts-th failed round: lo, doubling,
// capped at hi. A non-positive lo means BackoffMin.
func Backoff(attempts int, lo, hi time.Duration) time.Duration {
	if lo <= 0 {
		lo = BackoffMin
	}
	if hi < lo {
		hi = lo
	}
	d := lo
	for i := 1; i < attempts; i++ {
		if d > hi/2 {
			return hi
		}
		d *= 2
	}
	return min(d, hi)
}

// Round is the outcome of one delivery round.
type Round struct {
	// CommandRan: the notifier command was run this round.
	CommandRan bool
	// CommandExit is its exit status (-1 when it was killed or could not
	// start).
	CommandExit int
	// CommandErr is why it failed; nil on exit 0.
	CommandErr error
	// WebhookTried: the webhook was called this round.
	WebhookTried bool
	// WebhookErr is why the call failed; nil on a 2xx answer.
	WebhookErr error
}

// Channels says which notifiers are configured.
type Channels struct {
	Command bool
	Webhook bool
}

// Pending reports which notifiers still have to handle ep's escalation.
func (ch Channels) Pending(ep Episode) (command, webhook bool) {
	return ch.Command && !ep.CommandDone, ch.Webhook && !ep.WebhookDone
}

// Apply records round r in ep at now: the command runs once per
// escalation (its status is kept, success or not); the webhook is retried
// with backoff (bmin doubling to bmax) until it answers 2xx. Delivered is
// set once every configured channel is done.
func Apply(ep Episode, ch Channels, r Round, now time.Time, bmin, bmax time.Duration) Episode {
	ep.Attempts++
	var errs []error
	if r.CommandRan {
		ep.CommandDone = true
		exit := r.CommandExit
		ep.CommandExit = &exit
		if r.CommandErr != nil {
			errs = append(errs, fmt.Errorf("command: %w", r.CommandErr))
		}
	}
	if r.WebhookTried {
		if r.WebhookErr == nil {
			ep.WebhookDone = true
		} else {
			errs = append(errs, fmt.Errorf("webhook: %w", r.WebhookErr))
		}
	}
	ep.LastError = ""
	if err := errors.Join(errs...); err != nil {
		ep.LastError = err.Error()
	}
	cmd, hook := ch.Pending(ep)
	ep.Delivered = !cmd && !hook
	ep.NextAttempt = nil
	if !ep.Delivered {
		at := now.Add(Backoff(ep.Attempts, bmin, bmax))
		ep.NextAttempt = &at
	}
	return ep
}

// Due reports whether an owed escalation may be attempted at now.
func Due(ep Episode, now time.Time) bool {
	return ep.Owed() && (ep.NextAttempt == nil || !ep.NextAttempt.After(now))
}
