// Package selector parses and matches kubectl-style label selectors: "role=worker,state!=failed".
package selector

import (
	"fmt"
	"slices"
	"strings"
)

// Requirement is one term of a selector: Key equals (or, with Not, differs
// from) Value.
type Requirement struct {
	Key   string
	Value string
	Not   bool
}

// Selector is a conjunction of requirements; the zero Selector matches
// everything.
type Selector []Requirement

// Parse reads a comma-separated list of key=value, key==value and
// key!=value terms. Keys must be among known (named in the error
// otherwise); an empty string is the empty selector.
func Parse(s string, known []string) (Selector, error) {
	var sel Selector
	if strings.TrimSpace(s) == "" {
		return sel, nil
	}
	for term := range strings.SplitSeq(s, ",") {
		term = strings.TrimSpace(term)
		var r Requirement
		var ok bool
		switch {
		case strings.Contains(term, "!="):
			r.Key, r.Value, ok = strings.Cut(term, "!=")
			r.Not = true
		case strings.Contains(term, "=="):
			r.Key, r.Value, ok = strings.Cut(term, "==")
		default:
			r.Key, r.Value, ok = strings.Cut(term, "=")
		}
		r.Key, r.Value = strings.TrimSpace(r.Key), strings.TrimSpace(r.Value)
		if !ok || r.Key == "" {
			return nil, fmt.Errorf("selector term %q: want key=value or key!=value", term)
		}
		if strings.ContainsAny(r.Value, "=!") {
			return nil, fmt.Errorf("selector term %q: want key=value or key!=value", term)
		}
		if !slices.Contains(known, r.Key) {
			return nil, fmt.Errorf("selector key %q: want one of %s", r.Key, strings.Join(known, ", "))
		}
		sel = append(sel, r)
	}
	return sel, nil
}

// Match reports whether labels satisfy every requirement. A missing label
// is the empty string.
func (s Selector) Match(labels map[string]string) bool {
	for _, r := range s {
		if (labels[r.Key] == r.Value) == r.Not {
			return false
		}
	}
	return true
}

// String renders the selector back as key=value terms.
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		op := "="
		if r.Not {
			op = "!="
		}
		parts[i] = r.Key + op + r.Value
	}
	return strings.Join(parts, ",")
}
