package sched

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// gateDependencies sorts jobs by their --after dependencies (Slurm's
// --dependency), looked up with state: ready when every dependency has
// ended as it requires; waiting, with a reason, while one has not ended;
// cancelled, with why, when one does not exist or ended in a way its
// condition excludes (an :ok one otherwise than succeeded, a :notok one
// succeeded), since then the job can never run: Slurm's
// DependencyNeverSatisfied, with its kill_invalid_depend. A cancel wins
// over a wait. ready reuses the array of jobs.
func gateDependencies(jobs []*structs.Job, state func(id string) (structs.JobState, bool)) (
	ready []*structs.Job, waiting []structs.JobBlocked, cancels []structs.JobCancel) {
	ready = jobs[:0]
	for _, j := range jobs {
		wait, never := dependencyVerdict(j, state)
		switch {
		case never != "":
			cancels = append(cancels, structs.JobCancel{JobID: j.ID, Reason: never})
		case wait != "":
			waiting = append(waiting, structs.JobBlocked{JobID: j.ID, Reason: wait})
		default:
			ready = append(ready, j)
		}
	}
	return ready, waiting, cancels
}

// dependencyVerdict reads a job's dependencies in spec order. never names
// the first that can never be met; wait names the last that has not ended
// before it. Both are empty when every dependency is met.
func dependencyVerdict(j *structs.Job, state func(id string) (structs.JobState, bool)) (wait, never string) {
	for _, d := range j.Spec.After {
		st, ok := state(d.JobID)
		switch {
		case !ok:
			return wait, fmt.Sprintf("dependency %s does not exist", structs.ShortID(d.JobID))
		case !st.Terminal():
			wait = fmt.Sprintf("waiting for job %s (%s)", structs.ShortID(d.JobID), st)
		case d.Condition == structs.AfterOK && st != structs.JobSucceeded,
			d.Condition == structs.AfterNotOK && st == structs.JobSucceeded:
			return wait, fmt.Sprintf("dependency %s %s: never satisfied (after%s)", structs.ShortID(d.JobID), st, d.Condition)
		}
	}
	return wait, ""
}
