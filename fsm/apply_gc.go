package fsm

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// MaxGCJobs is the most jobs one JobGC entry may name; a leader with more
// to remove cuts its list into entries of this size.
const MaxGCJobs = 1000

// applyJobGC removes finished jobs whose retention has passed, with their
// allocations, from the state and every index. Each job is checked again
// here, on committed state and against the leader's stamped At (checkGC);
// jobs that fail are kept and listed in the returned error, the others
// are removed.
func (s *state) applyJobGC(l *raft.Log) any {
	var req structs.JobGCRequest
	decode(l, &req)
	switch {
	case len(req.JobIDs) == 0:
		return fmt.Errorf("job gc: %w: no jobs", ErrInvalidRequest)
	case len(req.JobIDs) > MaxGCJobs:
		return fmt.Errorf("job gc: %w: %d jobs, more than the limit of %d", ErrInvalidRequest, len(req.JobIDs), MaxGCJobs)
	case req.At.IsZero():
		return fmt.Errorf("job gc: %w: no time stamped", ErrInvalidRequest)
	}
	// Removing finished tasks does not change which task of an array has
	// not ended, so that is looked up once per array and entry.
	openArrays := map[string]*structs.Job{}
	var kept []error
	for _, id := range req.JobIDs {
		if err := s.checkGC(id, time.Duration(req.Retention), req.At, openArrays); err != nil {
			kept = append(kept, err)
			continue
		}
		s.removeJob(s.jobs[id])
	}
	return errors.Join(kept...)
}

// checkGC says why a job must stay, or nil when it may go: it exists, has
// finished, has been finished for the retention at `at`, no job that has
// not ended depends on it, no task of its array has not ended, and none of
// its allocations is live. openArrays caches, per array, its unfinished
// task with the lowest ID (nil: none).
func (s *state) checkGC(id string, retention time.Duration, at time.Time, openArrays map[string]*structs.Job) error {
	j, ok := s.jobs[id]
	short := structs.ShortID(id)
	switch {
	case !ok:
		return fmt.Errorf("job %s: %w", short, ErrJobNotFound)
	case !j.State.Terminal():
		return fmt.Errorf("job %s: %w: it is %s, not finished", short, ErrJobRetained, j.State)
	case !expired(j, retention, at):
		return fmt.Errorf("job %s: %w: finished at %s, kept for %s", short, ErrJobRetained,
			j.FinishedAt.Format(time.RFC3339), retention)
	}
	if d := firstUnfinished(s.dependents[id]); d != nil {
		return fmt.Errorf("job %s: %w: job %s, which is %s, depends on it", short, ErrJobRetained, structs.ShortID(d.ID), d.State)
	}
	if j.ArrayID != "" {
		t, ok := openArrays[j.ArrayID]
		if !ok {
			t = firstUnfinished(s.arrayTasks[j.ArrayID])
			openArrays[j.ArrayID] = t
		}
		if t != nil {
			return fmt.Errorf("job %s: %w: task %s of its array is %s", short, ErrJobRetained, structs.ShortID(t.ID), t.State)
		}
	}
	if slices.ContainsFunc(s.jobAllocs[id], (*structs.Allocation).Live) {
		return fmt.Errorf("job %s: %w: an allocation is still live", short, ErrJobRetained)
	}
	return nil
}

// expired reports whether a finished job has been finished for retention
// at `at`.
func expired(j *structs.Job, retention time.Duration, at time.Time) bool {
	return !j.FinishedAt.Add(retention).After(at)
}

// firstUnfinished returns the job of a set that has not ended with the
// lowest ID, or nil; the lowest, so that what Apply says does not depend
// on map order.
func firstUnfinished(set jobSet) *structs.Job {
	var first *structs.Job
	for _, j := range set {
		if !j.State.Terminal() && (first == nil || j.ID < first.ID) {
			first = j
		}
	}
	return first
}
