package sim

import (
	"encoding/json"
	"testing"
	"time"

	"herd"
	"herd/internal/agents"
)

// TestStopFailurePayload: the sim's rate-limit hook reads, through
// Claude's activity table, as blocked by a rate limit with the reset time
// it names.
func TestStopFailurePayload(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		resetIn time.Duration
		wantAt  bool
	}{{3 * time.Second, true}, {0, false}} {
		b, err := json.Marshal(hookStep{"StopFailure", "rate_limit"}.payload("s", "/w", c.resetIn))
		if err != nil {
			t.Fatal(err)
		}
		sig, err := agents.ParseHook(herd.AgentClaude, b, "", now)
		if err != nil {
			t.Fatal(err)
		}
		if sig.Activity != herd.ActivityBlocked || sig.Reason != agents.ReasonRateLimited {
			t.Errorf("[reset in %s] expected blocked by a rate limit, got %s %s", c.resetIn, sig.Activity, sig.Reason)
		}
		if got := !sig.ResetAt.IsZero(); got != c.wantAt || (got && sig.ResetAt.Sub(now).Round(time.Second) != c.resetIn) {
			t.Errorf("[reset in %s] expected reset named=%v at now+%s, got %v", c.resetIn, c.wantAt, c.resetIn, sig.ResetAt)
		}
	}
}
