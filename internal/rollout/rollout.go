// Package rollout is pure: a role's template fingerprint, recorded with
// each incarnation, and the judgement of which sessions run an older
// template than their role's (OUTDATED).
package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"

	"herd"
)

// Parts of a fingerprint, in the order they are named.
const (
	PartCommand = "command"
	PartWorkdir = "workdir"
	PartEnv     = "env"
)

// ReasonRoleChanged is the outdated_reason of a session whose role's
// command, workdir or env changed since it was launched.
const ReasonRoleChanged = "role_changed"

// Fingerprint is the role's template as an incarnation records it:
// "command=H workdir=H env=H", each H a short hash, so that a later
// comparison names what changed without keeping the values (env values
// may be secrets).
func Fingerprint(r herd.Role) string {
	keys := make([]string, 0, len(r.Env))
	for k := range r.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([][2]string, len(keys))
	for i, k := range keys {
		env[i] = [2]string{k, r.Env[k]}
	}
	return PartCommand + "=" + hash(r.Command) + " " + PartWorkdir + "=" + hash(r.Workdir) + " " + PartEnv + "=" + hash(env)
}

func hash(v any) string {
	b, _ := json.Marshal(v) // strings, slices of strings: never fails
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Changed lists the parts of the template that differ between a recorded
// fingerprint and the role's current one, in the order command, workdir,
// env. A fingerprint that is empty (an incarnation recorded before
// fingerprints) or unreadable is not judged: nil.
func Changed(recorded string, r herd.Role) []string {
	return ChangedFrom(recorded, Fingerprint(r))
}

// ChangedFrom is Changed against the role's current fingerprint, computed
// once by a caller judging many sessions of one role.
func ChangedFrom(recorded, current string) []string {
	if recorded == current {
		return nil
	}
	old, ok := parse(recorded)
	if !ok {
		return nil
	}
	cur, _ := parse(current)
	var out []string
	for _, p := range []string{PartCommand, PartWorkdir, PartEnv} {
		if old[p] != cur[p] {
			out = append(out, p)
		}
	}
	return out
}

func parse(fp string) (map[string]string, bool) {
	fields := strings.Fields(fp)
	if len(fields) != 3 {
		return nil, false
	}
	m := make(map[string]string, 3)
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || v == "" {
			return nil, false
		}
		m[k] = v
	}
	for _, p := range []string{PartCommand, PartWorkdir, PartEnv} {
		if _, ok := m[p]; !ok {
			return nil, false
		}
	}
	return m, true
}

// Verdict is whether a session runs its role's current template.
type Verdict struct {
	Outdated bool
	// Reason is ReasonRoleChanged plus what changed, e.g.
	// "role_changed: command, env"; empty when not outdated.
	Reason string
}

// Judge judges a session's incarnation against its role. Only sessions
// holding a live incarnation (or waiting to relaunch one) are judged: a
// stopped or failed session runs nothing.
func Judge(s herd.Session, recorded string, r herd.Role) Verdict {
	if !judged(s) {
		return Verdict{}
	}
	return JudgeFrom(s, recorded, Fingerprint(r))
}

// judged reports whether s is judged at all.
func judged(s herd.Session) bool {
	return s.State.CountsTowardReplicas() && s.State != herd.StateBackoff
}

// JudgeFrom is Judge against the role's current fingerprint, computed
// once by a caller judging many sessions of one role.
func JudgeFrom(s herd.Session, recorded, current string) Verdict {
	if !judged(s) {
		return Verdict{}
	}
	changed := ChangedFrom(recorded, current)
	if len(changed) == 0 {
		return Verdict{}
	}
	return Verdict{Outdated: true, Reason: ReasonRoleChanged + ": " + strings.Join(changed, ", ")}
}
