// Package storetest is a conformance suite every store.Store backend must pass.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd/internal/store"
)

// Run runs the conformance suite against the backend that open creates.
//
// open must return a new, empty store, independent of every other store it
// returned: the subtests run in parallel. Run closes each store it opens (so
// Close must tolerate being called again if open also registers it).
//
// The contract checked beyond the comments of store.Tx:
//   - every time returned is in UTC and Equal to the time written (the zone
//     and monotonic reading are not kept; precision is the nanosecond);
//   - nil pointers, nil slices and nil maps read back as nil;
//   - Role, Session and Incarnation report a missing row with an error
//     wrapping store.ErrNotFound; deleting a missing row is not an error;
//   - Put* with an empty key (name or id) fails;
//   - event Data round-trips through JSON, so numbers read back as float64,
//     nested lists as []any and nested objects as map[string]any;
//   - a write inside View fails, and Update commits nothing when fn fails
//     or panics.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RoleRoundTrip", testRoleRoundTrip},
		{"RolesOrderedAndReplaced", testRolesOrderedAndReplaced},
		{"DeleteRole", testDeleteRole},
		{"SessionRoundTrip", testSessionRoundTrip},
		{"SessionsOrderedAndReplaced", testSessionsOrderedAndReplaced},
		{"DeleteSession", testDeleteSession},
		{"IncarnationRoundTrip", testIncarnationRoundTrip},
		{"OpenIncarnations", testOpenIncarnations},
		{"NotFound", testNotFound},
		{"EmptyKeysRejected", testEmptyKeysRejected},
		{"AppendEventSetsID", testAppendEventSetsID},
		{"EventFilters", testEventFilters},
		{"EventTask", testEventTask},
		{"EventData", testEventData},
		{"DeleteEventsBefore", testDeleteEventsBefore},
		{"DeleteEventsBeyond", testDeleteEventsBeyond},
		{"PruneEvents", testPruneEvents},
		{"DeleteIncarnationsEnded", testDeleteIncarnationsEnded},
		{"OddText", testOddText},
		{"ByteOrder", testByteOrder},
		{"HostRoundTrip", testHostRoundTrip},
		{"HostsOrderedAndReplaced", testHostsOrderedAndReplaced},
		{"Lease", testLease},
		{"SessionsOnHost", testSessionsOnHost},
		{"OpenIncarnationsOnHost", testOpenIncarnationsOnHost},
		{"Placements", testPlacements},
		{"UsageAdds", testUsageAdds},
		{"UsageCursors", testUsageCursors},
		{"CommandRoundTrip", testCommandRoundTrip},
		{"CommandsOnHost", testCommandsOnHost},
		{"ClaimCommands", testClaimCommands},
		{"SessionsWithPIDs", testSessionsWithPIDs},
		{"AnswersOnce", testAnswersOnce},
		{"AnswerClaimConcurrent", testAnswerClaimConcurrent},
		{"SpentNonces", testSpentNonces},
		{"Users", testUsers},
		{"UserTokens", testUserTokens},
		{"TaskRoundTrip", testTaskRoundTrip},
		{"TaskFilters", testTaskFilters},
		{"TaskHeldOnce", testTaskHeldOnce},
		{"TaskAssignConcurrent", testTaskAssignConcurrent},
		{"KV", testKV},
		{"ClaimKVOnce", testClaimKVOnce},
		{"ClaimKVConcurrent", testClaimKVConcurrent},
		{"RaceStops", testRaceStops},
		{"RaceCounter", testRaceCounter},
		{"FollowLog", testFollowLog},
		{"UpdateRollback", testUpdateRollback},
		{"UpdateRollbackOnPanic", testUpdateRollbackOnPanic},
		{"WriteVisibleInLaterView", testWriteVisibleInLaterView},
		{"ViewIsReadOnly", testViewIsReadOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// zone is deliberately not UTC so that the suite checks the store converts.
var zone = time.FixedZone("UTC+2", 2*60*60)

// base is the reference time of the fixtures, with nanoseconds.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, zone)

// at is base plus d seconds.
func at(d int) time.Time { return base.Add(time.Duration(d) * time.Second) }

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// cmpOpts compares times by instant.
var cmpOpts = cmp.Options{cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })}

// ctx is a context for one subtest, bounded so a hung backend fails the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// update runs fn in s.Update and fails the test on error.
func update(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Update(ctx(t), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// view runs fn in s.View and fails the test on error.
func view(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.View(ctx(t), fn); err != nil {
		t.Fatalf("view: %v", err)
	}
}

// checkUTC fails the test for every non-nil time not in UTC.
func checkUTC(t *testing.T, what string, times ...*time.Time) {
	t.Helper()
	for i, tm := range times {
		if tm != nil && tm.Location() != time.UTC {
			t.Errorf("[%s] time %d: expected location UTC, got %v (%v)", what, i, tm.Location(), tm)
		}
	}
}

// diff fails the test when got differs from want.
func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, cmpOpts); d != "" {
		t.Errorf("[%s] mismatch (-want +got):\n%s", what, d)
	}
}
