package agents

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// rateLimitPhrases identify a rate or usage limit in an error text.
var rateLimitPhrases = []string{
	"rate limit", "rate_limit", "usage limit", "limit reached", "hit your limit",
	"quota", "resource_exhausted", "too many requests",
}

// status429RE is the HTTP status 429 as a number of its own (not a part of
// a port such as 127.0.0.1:42959).
var status429RE = regexp.MustCompile(`(^|[^0-9.:])429([^0-9]|$)`)

// IsRateLimit reports whether an error text speaks of a rate or usage
// limit.
func IsRateLimit(text string) bool {
	t := strings.ToLower(text)
	for _, p := range rateLimitPhrases {
		if strings.Contains(t, p) {
			return true
		}
	}
	return status429RE.MatchString(t)
}

var (
	// "usage limit reached|1735689600" (older Claude Code).
	epochRE = regexp.MustCompile(`limit reached\|(\d{9,11})\b`)
	// "resets 5pm", "resets at 5:30 pm (Europe/Berlin)", "reset at 17:00
	// (UTC)", "Try again at 5:00 PM." (Codex).
	clockRE = regexp.MustCompile(`(?i)\b(?:resets?|try again)\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?`)
	// "try again in 30 minutes", "resets in 2h 5m", "retry after 45 seconds".
	relRE  = regexp.MustCompile(`(?i)\b(?:in|after)\s+((?:\d+\s*(?:hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b[\s,]*(?:and\s+)?)+)`)
	partRE = regexp.MustCompile(`(?i)(\d+)\s*(hours?|hrs?|h|minutes?|mins?|m|seconds?|secs?|s)\b`)
)

// maxReset bounds how far ahead a parsed reset time may be: a limit never
// resets more than a week out, so a larger value is a misreading.
const maxReset = 7 * 24 * time.Hour

// ParseResetTime finds when a limit resets in an error text: a Unix time
// after "limit reached|", a clock time after "resets" (the next such
// time after now, in the named IANA zone or else now's), or a delay after
// "in"/"after". ok is false when the text names none, or names one in the
// past or more than a week ahead.
func ParseResetTime(text string, now time.Time) (t time.Time, ok bool) {
	if m := epochRE.FindStringSubmatch(text); m != nil {
		sec, err := strconv.ParseInt(m[1], 10, 64)
		if err == nil {
			return bounded(time.Unix(sec, 0).In(now.Location()), now)
		}
	}
	if m := clockRE.FindStringSubmatch(text); m != nil {
		if t, ok := clockTime(m, now); ok {
			return bounded(t, now)
		}
	}
	if m := relRE.FindStringSubmatch(text); m != nil {
		var d time.Duration
		for _, p := range partRE.FindAllStringSubmatch(m[1], -1) {
			n, err := strconv.Atoi(p[1])
			if err != nil || n > 1e6 {
				return time.Time{}, false
			}
			switch u := strings.ToLower(p[2]); u[0] {
			case 'h':
				d += time.Duration(n) * time.Hour
			case 'm':
				d += time.Duration(n) * time.Minute
			default:
				d += time.Duration(n) * time.Second
			}
		}
		if d > 0 {
			return bounded(now.Add(d), now)
		}
	}
	return time.Time{}, false
}

// clockTime is the next moment after now at the clock time matched by
// clockRE.
func clockTime(m []string, now time.Time) (time.Time, bool) {
	h, err := strconv.Atoi(m[1])
	if err != nil {
		return time.Time{}, false
	}
	mins := 0
	if m[2] != "" {
		if mins, err = strconv.Atoi(m[2]); err != nil || mins > 59 {
			return time.Time{}, false
		}
	}
	switch strings.ToLower(m[3]) {
	case "am":
		if h < 1 || h > 12 {
			return time.Time{}, false
		}
		if h == 12 {
			h = 0
		}
	case "pm":
		if h < 1 || h > 12 {
			return time.Time{}, false
		}
		if h != 12 {
			h += 12
		}
	default:
		if m[2] == "" || h > 23 { // a bare number is no clock time
			return time.Time{}, false
		}
	}
	loc := now.Location()
	if m[4] != "" {
		l, err := time.LoadLocation(m[4])
		if err != nil {
			return time.Time{}, false
		}
		loc = l
	}
	n := now.In(loc)
	t := time.Date(n.Year(), n.Month(), n.Day(), h, mins, 0, 0, loc)
	if !t.After(n) {
		t = t.AddDate(0, 0, 1)
	}
	return t, true
}

func bounded(t, now time.Time) (time.Time, bool) {
	if !t.After(now) || t.Sub(now) > maxReset {
		return time.Time{}, false
	}
	return t, true
}
