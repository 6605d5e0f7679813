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
	// Multifactor, when set (the cluster has accounts or QoS), orders
	// the queue by the multifactor priority instead of --priority and
	// age, and carries the QoS preemption rules.
	Multifactor *Multifactor
	// Groups are the accounts' and QoS's limits with what the running
	// jobs hold (nil: none); a job that would pass one stays queued, with
	// the reason, and takes no reservation.
	Groups *groupBudget
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
	// The pass charges its own copy: o.Groups stays as it came, for the
	// preemptions after it.
	p.groups = placedGroups(o.Groups, &structs.Plan{}, nil)
	return p.run(queueOrder(jobs, o.Now, o.AgeStep, o.Multifactor))
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
// first), then waiting since (oldest first), then ID. Nil jobs are
// dropped. With m, the priority is the multifactor one, and each owner's
// --priority orders its own jobs among the places they hold (reorder).
func queueOrder(jobs []*structs.Job, now time.Time, step time.Duration, m *Multifactor) []*structs.Job {
	entries := queueEntries(jobs, now, step, m)
	out := make([]*structs.Job, len(entries))
	for i, e := range entries {
		out[i] = e.job
	}
	return out
}

// queueEntry is a job's place in the queue: the priority and waiting
// time that sort it, and the job's own --priority (reorder may give the
// place to another job of the same owner, once sorted).
type queueEntry struct {
	job   *structs.Job
	eff   int64
	since time.Duration // since now; compares faster than a time.Time
	own   int32
	// owner numbers the job's owner within the pass (with m only).
	owner int32
}

// queueEntries returns the jobs' places in queue order.
func queueEntries(jobs []*structs.Job, now time.Time, step time.Duration, m *Multifactor) []queueEntry {
	entries := make([]queueEntry, 0, len(jobs))
	var owners ownerIndex
	for _, j := range jobs {
		if j == nil {
			continue
		}
		e := queueEntry{job: j, since: waitingSince(j).Sub(now), own: int32(j.Spec.Priority)}
		if m == nil {
			e.eff = effectivePriority(j, now, step)
		} else {
			var fs float64
			e.owner, fs = owners.lookup(m, j)
			e.eff = m.factors(j, now, fs).Priority
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b queueEntry) int {
		// Not cmp.Or: it would compare the IDs of every pair.
		if a.eff != b.eff {
			return cmp.Compare(b.eff, a.eff)
		}
		if a.since != b.since {
			return cmp.Compare(a.since, b.since)
		}
		return cmp.Compare(a.job.ID, b.job.ID)
	})
	if m != nil {
		reorder(entries, len(owners.byName))
	}
	return entries
}
