package sched

import (
	"cmp"
	"slices"
	"time"

	"github.com/skein-dev/skein/structs"
)

// DefaultAgeStep is how long a queued job waits to earn one priority point
// when Options.AgeStep is zero: priority 10 is ten minutes of head start.
const DefaultAgeStep = time.Minute

// Options tune a Schedule pass.
type Options struct {
	// Now is the time of the pass, stamped by the leader: waiting times
	// and time limits are measured from it. sched reads no clock.
	Now time.Time
	// AgeStep is the wait that earns a queued job one priority point;
	// zero means DefaultAgeStep.
	AgeStep time.Duration
	// OwnerGPUs are the owners' running-GPU limits: a job whose owner
	// would pass its limit stays queued, with the reason, and takes no
	// reservation. The zero value limits nobody.
	OwnerGPUs OwnerGPUs
}

// Schedule plans the queued jobs the way the queue promises: highest
// effective priority first (Spec.Priority plus one point per AgeStep of
// waiting, without a cap), first come first served among equals, job ID
// last. The first job that does not fit gets a reservation on the nodes
// that free up soonest, and the jobs behind it run now only where they do
// not delay it (EASY backfill; see DESIGN.md). The input order does not
// matter.
func Schedule(s State, jobs []*structs.Job, o Options) structs.Plan {
	if len(jobs) == 0 {
		return structs.Plan{}
	}
	p := newPlacer(s, o.Now, true)
	p.owners = newOwnerBudget(o.OwnerGPUs)
	return p.run(queueOrder(jobs, o.Now, o.AgeStep))
}

// waitingSince is when a queued job started waiting for its turn: its
// submission, or the end of its restart backoff when it failed and waits
// to run again. A job requeued through no fault of its own (its node was
// lost) keeps its place.
func waitingSince(j *structs.Job) time.Time {
	if j.NotBefore.After(j.SubmittedAt) {
		return j.NotBefore
	}
	return j.SubmittedAt
}

// effectivePriority is the job's priority plus one point per whole step it
// has waited by now. Time before waitingSince (a clock behind the job's
// stamps) counts as no wait.
func effectivePriority(j *structs.Job, now time.Time, step time.Duration) int64 {
	if step <= 0 {
		step = DefaultAgeStep
	}
	wait := max(now.Sub(waitingSince(j)), 0)
	return int64(j.Spec.Priority) + int64(wait/step)
}

// queueOrder returns the jobs in queue order: effective priority (highest
// first), then waiting since (oldest first), then ID. Nil jobs are dropped.
func queueOrder(jobs []*structs.Job, now time.Time, step time.Duration) []*structs.Job {
	type entry struct {
		job   *structs.Job
		eff   int64
		since time.Duration // since now; compares faster than a time.Time
	}
	entries := make([]entry, 0, len(jobs))
	for _, j := range jobs {
		if j != nil {
			entries = append(entries, entry{j, effectivePriority(j, now, step), waitingSince(j).Sub(now)})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		// Not cmp.Or: it would compare the IDs of every pair.
		if a.eff != b.eff {
			return cmp.Compare(b.eff, a.eff)
		}
		if a.since != b.since {
			return cmp.Compare(a.since, b.since)
		}
		return cmp.Compare(a.job.ID, b.job.ID)
	})
	out := make([]*structs.Job, len(entries))
	for i, e := range entries {
		out[i] = e.job
	}
	return out
}
