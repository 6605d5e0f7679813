package fsm

import (
	"cmp"
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// ExpiredJobs returns copies of the finished jobs that have been finished
// for retention at `at`, by the rule a JobGC entry stamped with them
// applies, oldest first (by FinishedAt, then ID). Whether one may go also
// depends on GCHolds. Only the expired jobs are copied.
func (f *FSM) ExpiredJobs(retention time.Duration, at time.Time) []*structs.Job {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var jobs []*structs.Job
	for _, j := range f.st.jobs {
		if j.State.Terminal() && expired(j, retention, at) {
			jobs = append(jobs, j)
		}
	}
	slices.SortFunc(jobs, func(a, b *structs.Job) int {
		return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), cmp.Compare(a.ID, b.ID))
	})
	for i, j := range jobs {
		jobs[i] = j.Copy()
	}
	return jobs
}

// GCHolds returns what keeps a finished job in the state whatever its age:
// needed holds the IDs of jobs that a job which has not ended depends on,
// openArrays the IDs of job arrays with a task that has not ended. It reads
// the dependency and array indexes, copying no job.
func (f *FSM) GCHolds() (needed, openArrays map[string]bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	needed, openArrays = map[string]bool{}, map[string]bool{}
	for id, set := range f.st.dependents {
		if firstUnfinished(set) != nil {
			needed[id] = true
		}
	}
	for id, set := range f.st.arrayTasks {
		if firstUnfinished(set) != nil {
			openArrays[id] = true
		}
	}
	return needed, openArrays
}
