package sched

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/skein-dev/skein/structs"
)

// Limits of one pass: at most maxPreemptsPerPass jobs get victims, and at
// most maxPreemptChecksPerPass blocked jobs are looked at for them, so a
// burst of urgent jobs neither stops much work at once nor slows a pass.
const (
	maxPreemptsPerPass      = 4
	maxPreemptChecksPerPass = 16
)

// scheduleAndPreempt plans the ready jobs with Schedule, then stops running
// preemptible jobs of lower priority for jobs that still do not fit.
//
// A preemption is committed state, so a new leader continues it: a job
// whose victims are still stopping (running jobs whose PreemptedBy names
// it) preempts nothing more, and while it waits every ready job behind it
// in the queue is held back, so the GPUs its victims free go to it and
// not to lower-priority work. Jobs that preempt are not held back by each
// other; they get the freed GPUs in queue order. While a node is silent
// nothing is preempted: a job that would fit there may fit in a moment.
func scheduleAndPreempt(s State, queued, ready, running []*structs.Job, silent bool, o Options) structs.Plan {
	preempting := preemptionsUnderWay(s.AllLiveAllocs(), running)
	ready, held := holdBehindPreemptions(queued, ready, preempting)
	plan := Schedule(s, ready, o)
	n := len(plan.Blocked)
	plan.Blocked = append(plan.Blocked, held...)
	preempt(s, &plan, plan.Blocked[:n], ready, running, preempting, silent, o)
	return plan
}

// preempt looks, in queue order, at the jobs Schedule blocked: a job whose
// preemption is under way says so; for others it asks a Preemptor (built
// at most once, on the state with the plan's placements) for victims, and
// adds each answer to plan.Preemptions with the blocked reason to match.
// A victim chosen once is not a candidate again in the pass, and nothing
// is stopped for a job whose owner, account or QoS is at a limit. Jobs of
// a QoS that preempts another may stop that QoS's running jobs whatever
// their priorities.
func preempt(s State, plan *structs.Plan, blocked []structs.JobBlocked, ready, running []*structs.Job,
	preempting map[string]int, silent bool, o Options) {
	lowest, some := lowestPreemptible(running)
	var qos *structs.AccountTable
	if o.Multifactor != nil && qosPreempts(o.Multifactor.Accounts) {
		qos = o.Multifactor.Accounts
		for _, j := range running {
			some = some || qos.Preempted(j.Spec.QoS)
		}
	}
	var jobs map[string]*structs.Job
	var budget *ownerBudget
	var groups *groupBudget
	budgeted := false
	var p *Preemptor
	checked := 0
	for i := range blocked {
		b := &blocked[i]
		if n := preempting[b.JobID]; n > 0 {
			b.Reason = waitingForVictims(n)
			continue
		}
		if !some || silent || len(plan.Preemptions) == maxPreemptsPerPass || checked == maxPreemptChecksPerPass {
			continue
		}
		if jobs == nil {
			jobs = make(map[string]*structs.Job, len(ready))
			for _, j := range ready {
				jobs[j.ID] = j
			}
		}
		j := jobs[b.JobID]
		if j == nil || (j.Spec.Priority <= lowest && !qosPreemptor(qos, j)) {
			continue // no running job it may preempt
		}
		if !budgeted {
			budget, budgeted = placedBudget(o.OwnerGPUs, plan, jobs), true
			groups = placedGroups(o.Groups, plan, jobs)
		}
		if budget.refuse(j) != "" || groups.refuse(j) != "" {
			continue // its owner, account or QoS may not hold more
		}
		if p == nil {
			p = newPreemptor(withPlaced{State: s, live: withPlacements(s.AllLiveAllocs(), *plan)}, running, qos)
		}
		checked++
		victims := p.Victims(j)
		if len(victims) == 0 {
			continue
		}
		plan.Preemptions = append(plan.Preemptions, structs.Preemption{
			For: j.ID, Victims: victims, Attempts: attemptsOf(victims, running)})
		p.Exclude(victims)
		b.Reason = waitingForVictims(len(victims))
	}
}

// placedBudget is the owners' budget with the plan's placements charged.
func placedBudget(owners OwnerGPUs, plan *structs.Plan, jobs map[string]*structs.Job) *ownerBudget {
	b := newOwnerBudget(owners)
	for _, pl := range plan.Placements {
		if j := jobs[pl.JobID]; j != nil {
			b.charge(j)
		}
	}
	return b
}

// qosPreemptor reports whether j's QoS preempts some other QoS.
func qosPreemptor(qos *structs.AccountTable, j *structs.Job) bool {
	q := qos.QoSNamed(j.Spec.QoS)
	return q != nil && len(q.Preempt) > 0
}

// waitingForVictims is the blocked reason of a job waiting for n victims.
func waitingForVictims(n int) string {
	return fmt.Sprintf("waiting for %s to stop", plural(n, "preempted job"))
}

// preemptionsUnderWay counts, per preempting job, its victims still
// stopping: running jobs with PreemptedBy set and an allocation asked to
// stop.
func preemptionsUnderWay(live []*structs.Allocation, running []*structs.Job) map[string]int {
	out := map[string]int{}
	var byID map[string]*structs.Job
	seen := map[string]bool{}
	for _, a := range live {
		if a.DesiredState != structs.DesiredStop || seen[a.JobID] {
			continue
		}
		seen[a.JobID] = true
		if byID == nil {
			byID = make(map[string]*structs.Job, len(running))
			for _, j := range running {
				byID[j.ID] = j
			}
		}
		if j := byID[a.JobID]; j != nil && j.State == structs.JobRunning && j.PreemptedBy != "" {
			out[j.PreemptedBy]++
		}
	}
	return out
}

// holdBehindPreemptions keeps back the ready jobs that come after the first
// queued job with a preemption under way (in the order the state keeps the
// queue: priority, submission, ID), except jobs preempting themselves: the
// GPUs being freed are theirs.
func holdBehindPreemptions(queued, ready []*structs.Job, preempting map[string]int) (keep []*structs.Job, held []structs.JobBlocked) {
	var first *structs.Job
	for _, j := range queued {
		if preempting[j.ID] > 0 && (first == nil || queuedBefore(j, first) < 0) {
			first = j
		}
	}
	if first == nil {
		return ready, nil
	}
	reason := fmt.Sprintf("waiting: job %s (priority %d) is preempting lower-priority jobs to run first",
		structs.ShortID(first.ID), first.Spec.Priority)
	for _, j := range ready {
		if queuedBefore(j, first) <= 0 || preempting[j.ID] > 0 {
			keep = append(keep, j)
			continue
		}
		held = append(held, structs.JobBlocked{JobID: j.ID, Reason: reason})
	}
	return keep, held
}

// queuedBefore orders jobs the way the state keeps the queue: priority
// (highest first), then submission, then ID.
func queuedBefore(a, b *structs.Job) int {
	return cmp.Or(cmp.Compare(b.Spec.Priority, a.Spec.Priority),
		a.SubmittedAt.Compare(b.SubmittedAt), cmp.Compare(a.ID, b.ID))
}

// lowestPreemptible returns the lowest priority of the running jobs that
// may be preempted, and whether there is any.
func lowestPreemptible(running []*structs.Job) (int, bool) {
	lowest, some := 0, false
	for _, j := range running {
		if j.Spec.Preemptible && j.PreemptedBy == "" && !j.StopRequested && (!some || j.Spec.Priority < lowest) {
			lowest, some = j.Spec.Priority, true
		}
	}
	return lowest, some
}

// attemptsOf returns the attempt of each victim, 0 for one not running.
func attemptsOf(victims []string, running []*structs.Job) []int {
	out := make([]int, len(victims))
	for i, id := range victims {
		if k := slices.IndexFunc(running, func(j *structs.Job) bool { return j.ID == id }); k >= 0 {
			out[i] = running[k].Attempts
		}
	}
	return out
}

// withPlaced is a State whose live allocations include a plan's placements.
type withPlaced struct {
	State
	live []*structs.Allocation
}

func (w withPlaced) AllLiveAllocs() []*structs.Allocation { return w.live }

// withPlacements returns the live allocations and those of the plan.
func withPlacements(live []*structs.Allocation, plan structs.Plan) []*structs.Allocation {
	out := slices.Clone(live)
	for _, p := range plan.Placements {
		for i := range p.Allocations {
			out = append(out, &p.Allocations[i])
		}
	}
	return out
}
