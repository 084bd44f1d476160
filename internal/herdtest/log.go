package herdtest

import (
	"regexp"
	"strings"
)

// LogProblems returns the lines of a daemon log that fail a test: a panic,
// recovered (loop.Recovered logs it at ERROR) or not; a data race reported
// by a race-built binary; and an ERROR line matching none of expected.
func LogProblems(log []byte, expected []*regexp.Regexp) []string {
	var out []string
	for line := range strings.Lines(string(log)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.Contains(line, "recovered from a panic"),
			strings.HasPrefix(line, "panic: "), strings.HasPrefix(line, "fatal error: "):
			out = append(out, "a panic: "+line)
		case strings.Contains(line, "WARNING: DATA RACE"):
			out = append(out, "a data race (the log has its stacks)")
		case strings.Contains(line, "level=ERROR") && !matchesAny(line, expected):
			out = append(out, "an ERROR the test did not expect: "+line)
		}
	}
	return out
}

func matchesAny(line string, res []*regexp.Regexp) bool {
	for _, re := range res {
		if re.MatchString(line) {
			return true
		}
	}
	return false
}
