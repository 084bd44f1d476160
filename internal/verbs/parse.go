package verbs

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"herd/internal/errs"

	"golang.org/x/sys/unix"
)

// ParseGrace reads a grace period for verb what: "" is the daemon's.
func ParseGrace(what, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errs.Badf("%s: --grace %q: want a positive duration such as 10s", what, v)
	}
	if d > time.Hour {
		return 0, errs.Badf("%s: --grace %s: at most 1h", what, v)
	}
	return d, nil
}

// ParseSignal reads a signal as a name (TERM, SIGTERM, term) or a number.
func ParseSignal(v string) (unix.Signal, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("signal %d: want 1 to 64", n)
		}
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("signal %q: not a signal name (TERM, HUP, INT, USR1, ...) or number", v)
}

// parseDuration reads an optional duration within [lo, hi]: "" is 0.
func parseDuration(v string, lo, hi time.Duration) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < lo || d > hi {
		return 0, fmt.Errorf("%v out of range", d)
	}
	return d, nil
}

// parseInt reads a command argument's number.
func parseInt(v string) (int, error) { return strconv.Atoi(v) }
