package sched

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// gateDeadlines cancels the queued jobs that can no longer end by their
// --deadline (Slurm's DEADLINE): the deadline has passed, or starting now
// their time limit would run past it. It returns the others, the cancels,
// and when the earliest of the others' deadlines comes due (zero: none),
// for the pass to run again then.
func gateDeadlines(jobs []*structs.Job, now time.Time) (ok []*structs.Job, cancels []structs.JobCancel, wake time.Time) {
	ok = jobs[:0:0]
	for _, j := range jobs {
		d := j.Spec.Deadline
		if d.IsZero() {
			ok = append(ok, j)
			continue
		}
		limit := time.Duration(j.Spec.TimeLimit)
		latest := d.Add(-limit) // the last moment it may start
		if now.After(latest) {
			reason := "deadline " + d.UTC().Format(time.RFC3339) + " passed before the job started"
			if limit > 0 && !now.After(d) {
				reason = "deadline " + d.UTC().Format(time.RFC3339) + " cannot be met: its time limit " + limit.String() + " would end after it"
			}
			cancels = append(cancels, structs.JobCancel{JobID: j.ID, Reason: reason})
			continue
		}
		ok = append(ok, j)
		if wake.IsZero() || latest.Before(wake) {
			wake = latest
		}
	}
	return ok, cancels, wake
}
