// Package stallpolicy decides, purely, when a live agent counts as stalled,
// when to warn again, and when killing it is safe. The watchdog calls it;
// it reads nothing and does nothing itself.
package stallpolicy

import (
	"fmt"
	"time"

	"herd"
	"herd/internal/diag"
)

// ToolFactor multiplies stall_after while a tool runs (between PreToolUse
// and PostToolUse): a long build or test run is silent by nature.
const ToolFactor = 3

// prewarmShare is the part of the threshold after which a silent session
// gets a first /proc sample, so that its stall event carries a CPU delta.
const prewarmShare = 0.75

// Kill windows: CPU progress is judged over at least this long, bounded.
const (
	minKillWindow = time.Second
	maxKillWindow = time.Minute
)

// Config is the [watchdog] table.
type Config struct {
	StallAfter      time.Duration
	StallRepeat     time.Duration
	LivenessTimeout time.Duration
	AutoKill        bool
}

// Input is what the watchdog knows about one live session at one moment.
type Input struct {
	State    herd.State
	Activity herd.Activity
	// InTool is true between PreToolUse and PostToolUse(Failure).
	InTool bool
	// LastActivity is the time of the last output or real activity (the
	// incarnation's start when there was none).
	LastActivity time.Time
	// StalledSince is when the session became stalled (its StateSince).
	StalledSince time.Time
	// LastWarnAt is when the last stalled or stall_warning event was
	// written; zero means StalledSince.
	LastWarnAt time.Time
	// LastSampleAt is when the session's tree was last sampled; zero when never.
	LastSampleAt time.Time
	// KillBaseAt is when the sample the kill decision compares against was
	// taken; zero when there is none.
	KillBaseAt time.Time
}

// Action is what the watchdog does about a session now.
type Action string

// Actions.
const (
	None    Action = ""
	Stall   Action = "stall"   // running -> stalled, event stalled
	Warn    Action = "warn"    // still stalled: event stall_warning
	Unstall Action = "unstall" // stalled -> running, event unstalled
)

// Verdict is the outcome of Classify.
type Verdict struct {
	Action Action
	// Silence is how long the session has been silent.
	Silence time.Duration
	// Threshold is the silence that makes it stalled (longer in a tool).
	Threshold time.Duration
	// Sample asks for a /proc sample now, ahead of a coming stall event.
	Sample bool
	// KillBase asks for the sample the kill decision will compare against.
	KillBase bool
	// KillCheck asks for the kill decision now (see SafeToKill).
	KillCheck bool
}

// Threshold is the silence after which a session counts as stalled.
func Threshold(c Config, inTool bool) time.Duration {
	if inTool {
		return ToolFactor * c.StallAfter
	}
	return c.StallAfter
}

// KillWindow is how long CPU progress is measured before a kill: a tenth
// of the liveness timeout, between one second and one minute.
func KillWindow(c Config) time.Duration {
	return min(max(c.LivenessTimeout/10, minKillWindow), maxKillWindow)
}

// Exempt reports whether an activity is never a stall: a stall is a stuck
// turn, so only a working agent (or one whose activity is unknown: no
// hooks) can stall. An agent waiting for a person is an escalation, one
// blocked by a rate limit or an API error waits for it to pass, one whose
// turn finished is idle (the reaper's business): none is stuck.
func Exempt(a herd.Activity) bool {
	return a == herd.ActivityWaiting || a == herd.ActivityIdle || a == herd.ActivityBlocked
}

// Classify decides what to do about one session at now. It is pure.
func Classify(c Config, in Input, now time.Time) Verdict {
	v := Verdict{Threshold: Threshold(c, in.InTool)}
	if !in.LastActivity.IsZero() && now.After(in.LastActivity) {
		v.Silence = now.Sub(in.LastActivity)
	}
	if c.StallAfter <= 0 {
		return v // watchdog disabled
	}
	exempt := Exempt(in.Activity)
	switch in.State {
	case herd.StateRunning:
		if exempt || in.LastActivity.IsZero() {
			return v
		}
		if v.Silence >= v.Threshold {
			v.Action = Stall
			return v
		}
		near := time.Duration(float64(v.Threshold) * prewarmShare)
		if v.Silence >= near && !in.LastSampleAt.After(in.LastActivity) {
			v.Sample = true
		}
	case herd.StateStalled:
		if exempt || in.LastActivity.After(in.StalledSince) || v.Silence < v.Threshold {
			v.Action = Unstall
			return v
		}
		last := in.LastWarnAt
		if last.IsZero() {
			last = in.StalledSince
		}
		if c.StallRepeat > 0 && now.Sub(last) >= c.StallRepeat {
			v.Action = Warn
		}
		if !c.AutoKill || c.LivenessTimeout <= 0 {
			return v
		}
		stalledFor := now.Sub(in.StalledSince)
		window := KillWindow(c)
		switch {
		case in.KillBaseAt.IsZero() || in.KillBaseAt.Before(in.StalledSince):
			if stalledFor >= c.LivenessTimeout-window {
				v.KillBase = true
			}
		case stalledFor >= c.LivenessTimeout && now.Sub(in.KillBaseAt) >= window:
			v.KillCheck = true
		}
	}
	return v
}

// Facts is what /proc says about a stalled tree at a kill check.
type Facts struct {
	// Sampled is false when the tree could not be read.
	Sampled bool
	// CPU is the tree's CPU progress over the kill window.
	CPU diag.Progress
	// TCPEstablished counts the tree's own established TCP connections.
	TCPEstablished int
}

// SafeToKill decides whether a stalled agent past its liveness timeout may
// be killed: only with auto-kill on, a readable tree, no CPU progress over
// the window (unknown counts as progress) and no established TCP
// connection of its own. why says what decided, for the event log.
func SafeToKill(c Config, f Facts) (kill bool, why string) {
	switch {
	case !c.AutoKill:
		return false, "auto-kill is off"
	case !f.Sampled:
		return false, "process tree could not be read"
	case f.CPU == diag.ProgressYes:
		return false, "the process tree is using CPU"
	case f.CPU != diag.ProgressNo:
		return false, "CPU progress is unknown"
	case f.TCPEstablished > 0:
		return false, fmt.Sprintf("it holds %d established TCP connection(s)", f.TCPEstablished)
	}
	return true, "no CPU progress and no established TCP connection"
}
