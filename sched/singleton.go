package sched

import (
	"cmp"
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// nameKey is who holds a singleton name: a job's owner and name.
type nameKey struct{ owner, name string }

// gateSingletons holds back the ready jobs with Spec.Singleton (Slurm's
// --dependency=singleton) while another job of the same owner and name
// runs, or waits in the queue ahead of them, whatever that job's own
// spec says, as in Slurm. Ahead means submitted earlier (submissionOrder):
// singleton jobs of one name run one at a time in the order they were
// submitted, whatever their priorities. The reason names the job that
// holds the name; a running one wins over a queued one. ready reuses the
// array of jobs.
func gateSingletons(jobs, queued, running []*structs.Job) (ready []*structs.Job, waiting []structs.JobBlocked) {
	wanted := map[nameKey]bool{}
	for _, j := range jobs {
		if j.Spec.Singleton {
			wanted[nameKey{j.Owner, j.Spec.Name}] = true
		}
	}
	if len(wanted) == 0 {
		return jobs, nil
	}
	// The holder of each name wanted: the running job with the lowest ID,
	// else the queued job submitted first.
	holders := map[nameKey]*structs.Job{}
	for _, j := range running {
		k := nameKey{j.Owner, j.Spec.Name}
		if h := holders[k]; wanted[k] && (h == nil || j.ID < h.ID) {
			holders[k] = j
		}
	}
	first := map[nameKey]*structs.Job{}
	for _, j := range queued {
		k := nameKey{j.Owner, j.Spec.Name}
		if h := first[k]; wanted[k] && (h == nil || submissionOrder(j, h) < 0) {
			first[k] = j
		}
	}
	for k, j := range first {
		if holders[k] == nil {
			holders[k] = j
		}
	}
	ready = jobs[:0]
	for _, j := range jobs {
		h := holders[nameKey{j.Owner, j.Spec.Name}]
		if !j.Spec.Singleton || h == nil || h.ID == j.ID {
			ready = append(ready, j)
			continue
		}
		waiting = append(waiting, structs.JobBlocked{JobID: j.ID, Reason: fmt.Sprintf(
			"waiting for job %s (%s): singleton, of the same name %s and user", structs.ShortID(h.ID), h.State, j.Spec.Name)})
	}
	return ready, waiting
}

// submissionOrder orders jobs as they were submitted: by submission time,
// the tasks of one array by index, then by ID.
func submissionOrder(a, b *structs.Job) int {
	c := a.SubmittedAt.Compare(b.SubmittedAt)
	if c == 0 && a.ArrayID != "" && a.ArrayID == b.ArrayID {
		c = cmp.Compare(a.ArrayIndex, b.ArrayIndex)
	}
	return cmp.Or(c, cmp.Compare(a.ID, b.ID))
}
