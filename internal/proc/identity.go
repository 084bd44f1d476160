package proc

import (
	"errors"
	"fmt"

	"herd"
)

// Identify records the identity of the live process pid: its start time,
// the given boot id and the HERD_INCARNATION marker of its environment
// (empty when the environment cannot be read or has no marker).
func (fs FS) Identify(pid int, bootID string) (herd.Identity, error) {
	st, err := fs.Stat(pid)
	if err != nil {
		return herd.Identity{}, fmt.Errorf("proc: identify: %w", err)
	}
	if st.Zombie() {
		return herd.Identity{}, fmt.Errorf("proc: identify pid %d: exited: %w", pid, ErrNoProcess)
	}
	marker, _, err := fs.EnvValue(pid, herd.EnvIncarnation)
	if err != nil {
		marker = ""
	}
	// The pid may have been reused between the two reads; then the marker
	// belongs to another process. Re-reading the start time closes that gap.
	again, err := fs.Stat(pid)
	if err != nil {
		return herd.Identity{}, fmt.Errorf("proc: identify: %w", err)
	}
	if again.StartTime != st.StartTime {
		return herd.Identity{}, fmt.Errorf("proc: identify pid %d: replaced while reading: %w", pid, ErrNoProcess)
	}
	return herd.Identity{BootID: bootID, PID: pid, StartTime: st.StartTime, Marker: marker}, nil
}

// Check tells whether the process recorded as id is alive, given the
// current boot id:
//
//   - another boot id: dead (a process of an earlier boot cannot be ours);
//   - pid absent: dead;
//   - start time differs: dead (the pid now belongs to somebody else);
//   - /proc unreadable or stat garbled: unknown;
//   - zombie: dead;
//   - environment readable, id carries a marker and the environment's
//     HERD_INCARNATION differs: dead;
//   - otherwise alive.
func (fs FS) Check(id herd.Identity, bootID string) herd.Axis {
	axis, _ := fs.verify(id, bootID)
	return axis
}

// verify is Check with the reason: nil when alive, an error wrapping
// ErrNoProcess when the process is gone, or wrapping ErrIdentityMismatch
// when the pid is not (or cannot be shown to be) the recorded process.
func (fs FS) verify(id herd.Identity, bootID string) (herd.Axis, error) {
	var obs observation
	if id.PID > 0 && bootID != "" && id.BootID == bootID {
		obs = fs.observe(id)
	}
	return decide(id, bootID, obs)
}

// observe reads the stat of id.PID and, when the marker must be checked,
// its environment.
func (fs FS) observe(id herd.Identity) observation {
	var obs observation
	obs.stat, obs.statErr = fs.Stat(id.PID)
	if obs.statErr == nil && id.Marker != "" && !obs.stat.Zombie() {
		obs.env, obs.envErr = fs.Environ(id.PID)
	}
	return obs
}

// observation is what was read from /proc about a recorded pid.
type observation struct {
	stat    Stat
	statErr error
	env     map[string]string
	envErr  error // also set when the environment was not read at all
}

// decide is the pure truth table behind Check. obs is only consulted once
// the identity and boot id make reading /proc meaningful.
func decide(id herd.Identity, bootID string, obs observation) (herd.Axis, error) {
	switch {
	case id.PID <= 0:
		return herd.Unknown, fmt.Errorf("%w: no pid recorded", ErrIdentityMismatch)
	case bootID == "" || id.BootID == "":
		return herd.Unknown, fmt.Errorf("%w: boot id unknown", ErrIdentityMismatch)
	case id.BootID != bootID:
		return herd.Dead, fmt.Errorf("%w: pid %d is from boot %s, now %s", ErrIdentityMismatch, id.PID, id.BootID, bootID)
	}
	if obs.statErr != nil {
		if errors.Is(obs.statErr, ErrNoProcess) {
			return herd.Dead, fmt.Errorf("proc: pid %d: %w", id.PID, ErrNoProcess)
		}
		return herd.Unknown, fmt.Errorf("%w: pid %d: %w", ErrIdentityMismatch, id.PID, obs.statErr)
	}
	if obs.stat.StartTime != id.StartTime {
		return herd.Dead, fmt.Errorf("%w: pid %d started at %d, recorded %d", ErrIdentityMismatch, id.PID, obs.stat.StartTime, id.StartTime)
	}
	if obs.stat.Zombie() {
		return herd.Dead, fmt.Errorf("proc: pid %d exited (state %c): %w", id.PID, obs.stat.State, ErrNoProcess)
	}
	// An empty environment reads like an unreadable one: a process in
	// the middle of an exec shows none for an instant, and one run with
	// an emptied environment never has the marker to show.
	if id.Marker != "" && obs.envErr == nil && len(obs.env) > 0 {
		switch got, ok := obs.env[herd.EnvIncarnation]; {
		case !ok || got == "":
			// Same pid and start time, but the marker is gone (an exec
			// with a cleaned environment, an environment block written
			// over): not confirmed ours, and not proven gone either.
			return herd.Unknown, fmt.Errorf("%w: pid %d has no %s in its environment", ErrIdentityMismatch, id.PID, herd.EnvIncarnation)
		case got != id.Marker:
			return herd.Dead, fmt.Errorf("%w: pid %d has %s=%q, recorded %q", ErrIdentityMismatch, id.PID, herd.EnvIncarnation, got, id.Marker)
		}
	}
	return herd.Alive, nil
}
