package sched

import (
	"fmt"

	"github.com/skein-dev/skein/structs"
)

// capArrays holds back the tasks of job arrays that already run as many
// tasks as their --array ...%N allows. A task counts as running when it
// holds a live allocation, or when an earlier job of jobs was let through
// in this pass (whether or not it then finds room). ready reuses the array
// of jobs.
func capArrays(jobs []*structs.Job, live []*structs.Allocation) (ready []*structs.Job, waiting []structs.JobBlocked) {
	running := map[string]map[string]bool{} // array ID -> IDs of its running tasks
	count := func(arrayID, taskID string) {
		if running[arrayID] == nil {
			running[arrayID] = map[string]bool{}
		}
		running[arrayID][taskID] = true
	}
	for _, a := range live {
		if arr := structs.ArrayOf(a.JobID); arr != "" {
			count(arr, a.JobID)
		}
	}
	ready = jobs[:0]
	for _, j := range jobs {
		spec := j.Spec.Array
		if j.ArrayID == "" || spec == nil || spec.MaxRunning == 0 {
			ready = append(ready, j)
			continue
		}
		if len(running[j.ArrayID]) >= spec.MaxRunning {
			waiting = append(waiting, structs.JobBlocked{JobID: j.ID, Reason: fmt.Sprintf(
				"array %s runs its limit of %d tasks", structs.ShortID(j.ArrayID), spec.MaxRunning)})
			continue
		}
		count(j.ArrayID, j.ID)
		ready = append(ready, j)
	}
	return ready, waiting
}
