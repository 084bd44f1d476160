package escalation

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBackoff(t *testing.T) {
	cases := []struct {
		attempts int
		lo, hi   time.Duration
		want     time.Duration
	}{
		{1, time.Second, 5 * time.Minute, time.Second},
		{2, time.Second, 5 * time.Minute, 2 * time.Second},
		{3, time.Second, 5 * time.Minute, 4 * time.Second},
		{9, time.Second, 5 * time.Minute, 256 * time.Second},
		{10, time.Second, 5 * time.Minute, 5 * time.Minute},
		{1000, time.Second, 5 * time.Minute, 5 * time.Minute},
		{0, time.Second, 5 * time.Minute, time.Second},
		{-3, time.Second, 5 * time.Minute, time.Second},
		{1, 0, 0, BackoffMin},
		{4, 10 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond},
		{3, time.Minute, time.Second, time.Minute},
	}
	for _, c := range cases {
		if got := Backoff(c.attempts, c.lo, c.hi); got != c.want {
			t.Errorf("[attempts %d, %s..%s] expected %s, got %s", c.attempts, c.lo, c.hi, c.want, got)
		}
	}
}

func TestApply(t *testing.T) {
	now := at(0)
	owed := Episode{Open: true, EventID: 9, FiredAt: ptr(at(-time.Second))}
	both := Channels{Command: true, Webhook: true}
	boom := errors.New("boom")
	cases := []struct {
		name string
		ep   Episode
		ch   Channels
		r    Round
		want Episode
	}{
		{"both succeed", owed, both, Round{CommandRan: true, WebhookTried: true},
			func() Episode {
				e := owed
				e.Attempts, e.CommandDone, e.CommandExit, e.WebhookDone, e.Delivered = 1, true, ptr(0), true, true
				return e
			}()},
		{"command fails: recorded, not retried", owed, Channels{Command: true}, Round{CommandRan: true, CommandExit: -1, CommandErr: boom},
			func() Episode {
				e := owed
				e.Attempts, e.CommandDone, e.CommandExit, e.Delivered, e.LastError = 1, true, ptr(-1), true, "command: boom"
				return e
			}()},
		{"webhook fails: retried with backoff", owed, both, Round{CommandRan: true, CommandExit: 0, WebhookTried: true, WebhookErr: boom},
			func() Episode {
				e := owed
				e.Attempts, e.CommandDone, e.CommandExit, e.LastError, e.NextAttempt = 1, true, ptr(0), "webhook: boom", ptr(now.Add(time.Second))
				return e
			}()},
		{"third webhook failure backs off 4s", func() Episode { e := owed; e.Attempts = 2; e.CommandDone = true; return e }(), both,
			Round{WebhookTried: true, WebhookErr: boom},
			func() Episode {
				e := owed
				e.Attempts, e.CommandDone, e.LastError, e.NextAttempt = 3, true, "webhook: boom", ptr(now.Add(4*time.Second))
				return e
			}()},
		{"webhook succeeds later", func() Episode {
			e := owed
			e.Attempts, e.LastError, e.NextAttempt = 2, "webhook: boom", ptr(now)
			return e
		}(), Channels{Webhook: true}, Round{WebhookTried: true},
			func() Episode { e := owed; e.Attempts, e.WebhookDone, e.Delivered = 3, true, true; return e }()},
		{"no channels: delivered", owed, Channels{}, Round{},
			func() Episode { e := owed; e.Attempts, e.Delivered = 1, true; return e }()},
	}
	for _, c := range cases {
		got := Apply(c.ep, c.ch, c.r, now, time.Second, 5*time.Minute)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] (-expected +got):\n%s", c.name, diff)
		}
	}
}

func TestDue(t *testing.T) {
	cases := []struct {
		name string
		ep   Episode
		want bool
	}{
		{"nothing fired", Episode{Open: true}, false},
		{"delivered", Episode{EventID: 1, Delivered: true}, false},
		{"owed, first attempt", Episode{EventID: 1}, true},
		{"owed, retry now", Episode{EventID: 1, NextAttempt: ptr(at(0))}, true},
		{"owed, retry later", Episode{EventID: 1, NextAttempt: ptr(at(time.Nanosecond))}, false},
	}
	for _, c := range cases {
		if got := Due(c.ep, at(0)); got != c.want {
			t.Errorf("[%s] expected %v, got %v", c.name, c.want, got)
		}
	}
}
