package sched

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// View is the read-only state one scheduling pass decides from: what
// Schedule reads, the queue, the running jobs and the states of the jobs
// the queue depends on. fsm.StateView implements it, from one consistent
// copy of the state.
type View interface {
	State
	// QueuedJobs are the jobs waiting to be placed, cancelled ones left
	// out, in the order the state keeps the queue (priority, highest
	// first, then submission, then ID): array caps let tasks through in
	// this order, and the plan lists cancels and waiting jobs in it.
	QueuedJobs() []*structs.Job
	// RunningJobs are the running jobs that hold live allocations, in any
	// order: the candidates for preemption, the victims of preemptions
	// under way, and the holders of singleton names.
	RunningJobs() []*structs.Job
	// JobState is the state of the job with the given ID, false when no
	// such job exists. A pass asks only about the jobs queued jobs depend
	// on.
	JobState(id string) (structs.JobState, bool)
	// GPULimit is the most GPUs the live allocations of an owner's jobs
	// may hold (structs.Unlimited for no limit), and how many they hold.
	// A pass asks only about the owners of ready jobs.
	GPULimit(owner string) (limit, inUse int)
	// FairShare is the account table and the decayed usage; with no
	// account, the queue goes by --priority and age.
	FairShare() structs.FairShare
}

// Inputs are what a pass needs besides the state: the time, and what the
// leader knows from outside Raft.
type Inputs struct {
	// Now is the time of the pass (sched reads no clock): restart
	// backoff and waiting times are measured from it.
	Now time.Time
	// AgeStep is Options.AgeStep of the Schedule inside the pass.
	AgeStep time.Duration
	// Silent are the IDs of the nodes the leader suspects: not heard
	// from lately, or declared failed by gossip (the leader leaves itself
	// out). A ready node among them is treated as unresponsive for this
	// pass only.
	Silent map[string]bool
	// GossipUnhealthy maps a node ID to the mask of GPU indexes (bit i:
	// index i) the node announced unhealthy by gossip, ahead of its
	// health report's commit. Those GPUs are treated as unhealthy for
	// this pass only.
	GossipUnhealthy map[string]uint64
}

// Decision is everything one pass decides.
type Decision struct {
	// Plan holds the placements, each with its MASTER_PORT but without
	// allocation IDs or times (the leader stamps those), the blocked jobs
	// whose reason changed, the jobs to cancel and the preemptions.
	Plan structs.Plan
	// Wake is when the earliest job still in its restart backoff (or
	// before its --begin) may be placed, or the earliest --deadline by
	// which a queued job must start comes due; zero when none waits.
	Wake time.Time
}

// Decide runs one scheduling pass over the queue of v and returns its
// whole decision. In order:
//
//  0. Deadlines (deadline.go): a job that can no longer end by its
//     --deadline is cancelled.
//  1. Restart backoff: a job whose NotBefore is after Now (a restart's
//     backoff, or --begin) waits, silently.
//  2. Dependencies (deps.go): a job waits for its --after jobs to end, and
//     is cancelled when one does not exist or ended in a way its condition
//     excludes. A singleton job (singleton.go) waits while another job of
//     its owner and name runs or was submitted before it and is queued.
//  3. Array caps (arrays.go): a task waits while its array runs its limit.
//  4. Overlays (overlay.go): silent nodes and gossip GPU masks, on copies.
//  5. Schedule, behind any preemption under way and within each owner's
//     GPU limit (owners.go), then new preemptions for the jobs that still
//     do not fit (preempt_pass.go).
//  6. MASTER_PORT for every placement of a gang or a replica (ports.go).
//  7. Only the blocked reasons that differ from the job's current reason.
//
// Decide is pure: the same view and inputs give the same decision, and
// the view is never changed.
func Decide(v View, in Inputs) Decision {
	queued := v.QueuedJobs()
	live, late, dueAt := gateDeadlines(queued, in.Now)
	ready, wake := pastBackoff(live, in.Now)
	if !dueAt.IsZero() && (wake.IsZero() || dueAt.Before(wake)) {
		wake = dueAt
	}
	ready, waiting, cancels := gateDependencies(ready, v.JobState)
	cancels = append(late, cancels...)
	ready, single := gateSingletons(ready, queued, v.RunningJobs())
	ready, capped := capArrays(ready, v.AllLiveAllocs())
	waiting = append(append(waiting, single...), capped...)

	s, silent := overlay(v, in.Silent, in.GossipUnhealthy)
	fs := v.FairShare()
	o := Options{Now: in.Now, AgeStep: in.AgeStep, OwnerGPUs: ownerGPUsOf(v, ready),
		Multifactor: NewMultifactor(fs, v.AllNodes()), Groups: newGroupBudget(fs.Accounts, v.RunningJobs())}
	plan := scheduleAndPreempt(s, queued, ready, v.RunningJobs(), silent, o)
	plan.Blocked = append(plan.Blocked, waiting...)
	byID := make(map[string]*structs.Job, len(ready))
	for _, j := range ready {
		byID[j.ID] = j
	}
	assignMasterPorts(v.AllNodes(), v.AllLiveAllocs(), &plan, func(id string) bool {
		j, ok := byID[id]
		return !ok || j.NeedsMasterPort() // a job not known here: as before
	})
	plan.Blocked = changedReasons(queued, plan.Blocked)
	plan.Cancels = cancels
	return Decision{Plan: plan, Wake: wake}
}

// pastBackoff returns the jobs whose restart backoff is over at now, and
// the earliest end of the backoffs still running (zero: none).
func pastBackoff(jobs []*structs.Job, now time.Time) (ready []*structs.Job, wake time.Time) {
	ready = make([]*structs.Job, 0, len(jobs))
	for _, j := range jobs {
		if !j.NotBefore.After(now) {
			ready = append(ready, j)
			continue
		}
		if wake.IsZero() || j.NotBefore.Before(wake) {
			wake = j.NotBefore
		}
	}
	return ready, wake
}

// changedReasons keeps the blocked entries whose reason differs from what
// the job already says, so a pass over an unchanged queue writes nothing.
// Jobs without a reason yet (fresh submissions) need no entry in the map.
func changedReasons(queued []*structs.Job, blocked []structs.JobBlocked) []structs.JobBlocked {
	current := make(map[string]string)
	for _, j := range queued {
		if j.Reason != "" {
			current[j.ID] = j.Reason
		}
	}
	out := blocked[:0]
	for _, b := range blocked {
		if current[b.JobID] != b.Reason {
			out = append(out, b)
		}
	}
	return out
}
