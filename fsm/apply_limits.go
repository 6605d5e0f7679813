package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyLimitsSet changes the limits of a user, the defaults or the
// cluster's, and returns a copy of the whole table. A refused request
// changes nothing. New limits apply to what comes next: jobs already queued
// or running stay, even over a lowered limit.
func (s *state) applyLimitsSet(l *raft.Log) any {
	var req structs.LimitsSetRequest
	decode(l, &req)
	next, err := s.limits.Apply(&req)
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	if next.IsZero() {
		next = nil
	}
	s.limits = next
	return s.limitTable()
}

// limitTable returns a copy of the limits, never nil.
func (s *state) limitTable() *structs.LimitTable {
	if s.limits == nil {
		return &structs.LimitTable{}
	}
	return s.limits.Copy()
}

// checkSubmitLimits refuses a submit of spec by owner that would pass the
// owner's array or queued-jobs limit or the cluster's queued-jobs limit. An
// array counts as all its tasks. It reads counters kept up to date, so it
// costs the same however many jobs the state holds.
func (s *state) checkSubmitLimits(owner string, spec *structs.JobSpec) error {
	n := 1
	if spec.Array != nil {
		n = spec.Array.Len()
	}
	lim := s.limits.For(owner)
	what := "this job adds 1"
	if spec.Array != nil {
		what = fmt.Sprintf("this array adds %d", n)
		if structs.Exceeds(n, lim.MaxArray) {
			return fmt.Errorf("%w: %s may submit arrays of at most %d tasks (this one has %d)",
				ErrLimit, ownerName(owner), lim.MaxArray, n)
		}
	}
	return s.checkQueuedLimits(owner, n, what)
}

// checkQueuedLimits refuses n more queued jobs of owner that would pass
// the owner's or the cluster's queued-jobs limit; what says what adds
// them ("this job adds 1").
func (s *state) checkQueuedLimits(owner string, n int, what string) error {
	if have, max := s.ownerQueued[owner], s.limits.For(owner).MaxQueued; structs.Exceeds(have+n, max) {
		return fmt.Errorf("%w: %s may have %d queued jobs (has %d, %s)", ErrLimit, ownerName(owner), max, have, what)
	}
	if have, max := len(s.queued), s.limits.ClusterMaxQueued(); structs.Exceeds(have+n, max) {
		return fmt.Errorf("%w: the cluster may have %d queued jobs (has %d, %s)", ErrLimit, max, have, what)
	}
	return nil
}

// ownerName names a job owner in messages; the owner of jobs submitted
// before ACLs existed is "".
func ownerName(owner string) string {
	if owner == "" {
		return `user ""`
	}
	return owner
}
