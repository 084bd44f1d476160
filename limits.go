package herd

// Reasons of the resource limits and of agent updates.
const (
	// ReasonOOM: the kernel killed the incarnation for its cgroup's
	// memory.max (memory.events oom_kill went up).
	ReasonOOM = "oom"
	// ReasonMemoryMax: the watchdog stopped an incarnation whose tree's
	// resident memory went over the role's memory_max (where the kernel
	// cannot enforce it).
	ReasonMemoryMax = "memory_max"
	// ReasonBinaryUpdated: the agent's executable was replaced on disk
	// while it ran (/proc/PID/exe reads "(deleted)"): the session is
	// OUTDATED, and restarted at its next idle moment with
	// restart_on_update.
	ReasonBinaryUpdated = "binary_updated"
)
