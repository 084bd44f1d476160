package usage

import (
	"maps"
	"slices"
)

// sortedKeys returns m's keys in order, so records come out the same way
// each time.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
