package e2e

import (
	"testing"
	"time"

	"herd"
)

// TestExecRetriesAndShortRuns: an exec agent's stdout is read with its
// agent's stream parser. Retry notices (Claude's system/api_retry) are
// output but no progress: an agent that only retries stalls and never
// unstalls. A run shorter than a tick still ends with its activity and
// session id read.
func TestExecRetriesAndShortRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, fastRestart+`
[watchdog]
stall_after = "2s"
stall_repeat = "1h"
liveness_timeout = "1h"
`)
	e.start()
	const id = "5b0e7c1d-8a2f-4e3b-9c6d-1f2e3a4b5c6d"
	retry := `echo '{"type":"system","subtype":"init","session_id":"` + id + `"}'
while :; do echo '{"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"error":"overloaded"}'; sleep 0.2; done`
	e.must("run", "retry", "--runtime", "exec", "--agent", "claude", "--agent-process", "sh", "--", "sh", "-c", retry)
	short := `printf '%s\n' '{"type":"system","subtype":"init","session_id":"` + id + `"}' '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"` + id + `"}'`
	e.must("run", "short", "--runtime", "exec", "--restart", "never", "--agent", "claude", "--agent-process", "sh", "--", "sh", "-c", short)

	v := e.waitState("retry-0", herd.StateStalled, 10*time.Second)
	if v.Activity != herd.ActivityWorking {
		t.Errorf("[retry] expected stalled while working, got %s/%s", v.State, v.Activity)
	}
	// Retries go on for two more stall_afters: no unstall.
	time.Sleep(4 * time.Second) // the retries keep coming meanwhile; nothing to wait for
	if v, _ := e.session("retry-0"); v.State != herd.StateStalled {
		t.Errorf("[retry] expected still stalled, got %s", v.State)
	}
	if n := len(e.events("--session", "retry-0", "--kind", herd.EventUnstalled)); n != 0 {
		t.Errorf("[retry] expected no unstall from retry notices, got %d", n)
	}

	e.waitState("short-0", herd.StateSucceeded, 10*time.Second)
	sums := e.events("--session", "short-0", "--kind", herd.EventSummary)
	if len(sums) != 1 {
		t.Fatalf("[short] expected one summary, got %d", len(sums))
	}
	if d := sums[0].Data; d["agent_session_id"] != id || d["activity"] != string(herd.ActivityIdle) || d["events"] != float64(2) {
		t.Errorf("[short] expected the run's session id, idle and 2 lines in the summary, got %v", d)
	}
}
