package slots

import (
	"context"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/runtime/execrt"
	"herd/internal/store"
)

// refusalTail is how many lines of a dead agent's pane (or output) are
// read for its reason to refuse a resume.
const refusalTail = 60

// refusalTimeout bounds the reads of one refusal check.
const refusalTimeout = 2 * time.Second

// checkRefusedResume looks at an incarnation the crash path just ended:
// launched to resume the agent's conversation, did the agent refuse it
// (agents.ResumeRefused: its exit, and what it printed, read from its
// dead pane before anything clears it)? Then the refusal is recorded
// (status.ResumeFailed: `resumed`, reason resume_failed) and the id taken
// off the incarnation, so the relaunch starts fresh with the role's
// command instead of resuming the same dead id toward `failed`. It runs
// on the death's change and again, if the reconciler came first, at the
// relaunch; it reports whether the agent refused (recorded now or
// before).
func (s *Slots) checkRefusedResume(ctx context.Context, incID string) bool {
	ctx, cancel := context.WithTimeout(ctx, refusalTimeout)
	defer cancel()
	var inc herd.Incarnation
	var role herd.Role
	err := s.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if inc, err = tx.Incarnation(incID); err != nil {
			return err
		}
		sess, err := tx.Session(inc.Session)
		if err != nil {
			return err
		}
		role, err = tx.Role(sess.Role)
		return err
	})
	if err != nil || inc.Exit == nil || inc.Host != s.st.Host() {
		return false // a role gone relaunches nothing
	}
	kind := role.Agent
	if kind == "" || kind == herd.AgentGeneric {
		kind = agents.Infer(inc.Argv, "")
	}
	if !agents.ResumesID(kind, inc.Argv, inc.AgentSessionID) {
		return false
	}
	why, ok := s.readRefusal(ctx, kind, inc)
	if !ok {
		return false
	}
	recorded, err := s.st.ResumeFailed(ctx, inc.Session, inc.ID, inc.AgentSessionID, why)
	if err != nil {
		s.o.Log.Warn("resume refused, not recorded", "session", inc.Session, "incarnation", inc.ID, "err", err)
		return true
	}
	if recorded {
		s.o.Log.Info("the agent refused to resume its conversation; the next launch starts fresh",
			"session", inc.Session, "agent_session_id", inc.AgentSessionID, "evidence", why)
	}
	return true
}

// refusalReads is how many times a dead pane is read for the refusal,
// refusalEvery apart: the agent's last words may reach the pane a moment
// after its death is seen.
const (
	refusalReads = 3
	refusalEvery = 100 * time.Millisecond
)

// errLogs is a runtime that keeps an agent's stderr in a file of its own
// (exec).
type errLogs interface {
	Paths(session, incarnation string) (stdout, stderr string)
}

// readRefusal reads the dead agent's pane (or output) until it shows a
// refusal to resume, refusalReads times at most, and judges its exit
// with what it read last.
func (s *Slots) readRefusal(ctx context.Context, kind string, inc herd.Incarnation) (why string, ok bool) {
	rt, err := s.runtime(inc.RuntimeKind)
	if err != nil {
		return agents.ResumeRefused(kind, *inc.Exit, "")
	}
	var out []byte
	for i := range refusalReads {
		if i > 0 {
			select {
			case <-ctx.Done():
				return agents.ResumeRefused(kind, *inc.Exit, string(out))
			case <-time.After(refusalEvery):
			}
		}
		var cerr error
		if out, cerr = rt.Capture(ctx, inc, refusalTail); cerr != nil {
			// Gone: the exit alone speaks.
			s.o.Log.Info("resume check: the dead agent's output not read", "session", inc.Session, "err", cerr)
			break
		}
		if el, ok := rt.(errLogs); ok {
			// An exec agent's stderr is kept apart from its output.
			_, errPath := el.Paths(inc.Session, inc.ID)
			if b, err := execrt.ReadTail(errPath, refusalTail); err == nil {
				out = append(append(out, '\n'), b...)
			}
		}
		if _, said := agents.RefusalSaid(kind, string(out)); said {
			break
		}
	}
	return agents.ResumeRefused(kind, *inc.Exit, string(out))
}
