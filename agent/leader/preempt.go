package leader

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// maxPreemptsPerPass bounds the preemptions one scheduling pass commits, so
// a burst of urgent jobs cannot stall a pass on many Raft writes;
// maxPreemptChecksPerPass bounds the blocked jobs it looks for victims for.
const (
	maxPreemptsPerPass      = 4
	maxPreemptChecksPerPass = 16
)

// placeAndPreempt plans the ready jobs like sched.Schedule (the queue
// order, backfill around the head's reservation), and then, for jobs that still do not fit, stops running preemptible
// jobs of lower priority to make room (JobPreempt, one entry per job).
//
// Every decision lives in the FSM, so a new leader continues where this
// one stopped: a job whose victims are still stopping (their jobs carry
// PreemptedBy) preempts nothing more, and while it waits every ready job
// behind it in the queue is held back, so the GPUs its victims free go to
// it and not to lower-priority work. Jobs that preempt are not held back
// by each other; they get the freed GPUs in queue order.
func (l *Leader) placeAndPreempt(view *fsm.StateView, ready []*structs.Job, nowT time.Time) structs.Plan {
	jobs := &jobCache{l: l, got: map[string]*structs.Job{}}
	preempting := l.preemptionsUnderWay(view, jobs)
	ready, held := holdBehindPreemptions(view.Queued, ready, preempting)
	plan := sched.Schedule(view, ready, sched.Options{Now: nowT})
	blocked := len(plan.Blocked)
	plan.Blocked = append(plan.Blocked, held...)
	if blocked == 0 {
		return plan
	}
	// A node held back for silence may be back in a moment, and a job that
	// would fit on it must not preempt anyone.
	silent := slices.ContainsFunc(view.Nodes, isSilent)
	queued := make(map[string]*structs.Job, len(view.Queued))
	for _, j := range view.Queued {
		queued[j.ID] = j
	}
	var running []*structs.Job
	fetched := false
	var preemptor *sched.Preemptor
	lowest := 0 // the lowest priority of a running preemptible job
	committed, checked := 0, 0
	for i := range plan.Blocked[:blocked] {
		b := &plan.Blocked[i]
		if n := preempting[b.JobID]; n > 0 {
			b.Reason = fmt.Sprintf("waiting for %s to stop", plural(n, "preempted job"))
			continue
		}
		j := queued[b.JobID]
		if j == nil || silent || committed == maxPreemptsPerPass || checked == maxPreemptChecksPerPass {
			continue
		}
		if !fetched {
			fetched = true
			running = jobs.running(view.LiveAllocs)
			lowest = lowestPreemptible(running)
		}
		if j.Spec.Priority <= lowest {
			continue // no running job it may preempt
		}
		if preemptor == nil {
			preemptor = sched.NewPreemptor(&preemptView{StateView: view, live: withPlacements(view.LiveAllocs, plan)}, running)
		}
		checked++
		victims := preemptor.Victims(j)
		if len(victims) == 0 || !l.commitPreemption(j, victims, running) {
			continue
		}
		committed++
		preemptor.Exclude(victims) // not a candidate again in this pass
		b.Reason = fmt.Sprintf("waiting for %s to stop", plural(len(victims), "preempted job"))
	}
	return plan
}

// isSilent reports whether holdBackSilentNodes marked the node in this
// pass's view because the leader has not heard from it lately.
func isSilent(n *structs.Node) bool { return n.Status == nodeUnresponsive }

// nodeUnresponsive is the status holdBackSilentNodes gives, in the view
// only, to a ready node the leader has not heard from lately.
const nodeUnresponsive structs.NodeStatus = "unresponsive"

// lowestPreemptible returns the lowest priority of the running jobs that
// may be preempted, or MaxPriority when none may.
func lowestPreemptible(running []*structs.Job) int {
	lowest := structs.MaxPriority
	for _, j := range running {
		if j.Spec.Preemptible && j.PreemptedBy == "" && !j.StopRequested {
			lowest = min(lowest, j.Spec.Priority)
		}
	}
	return lowest
}

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

// commitPreemption writes the decision to stop victims for j; false when
// the write failed or the FSM refused every victim.
func (l *Leader) commitPreemption(j *structs.Job, victims []string, running []*structs.Job) bool {
	req := structs.JobPreemptRequest{Victims: victims, For: j.ID, At: now()}
	for _, id := range victims {
		attempt := 0
		if k := slices.IndexFunc(running, func(r *structs.Job) bool { return r.ID == id }); k >= 0 {
			attempt = running[k].Attempts
		}
		req.Attempts = append(req.Attempts, attempt)
	}
	short := make([]string, len(victims))
	for i, id := range victims {
		short[i] = structs.ShortID(id)
	}
	_, err := l.cfg.Apply(structs.JobPreemptType, req)
	if err != nil {
		l.log.Warn("preemption refused or failed", "job", structs.ShortID(j.ID), "victims", short, "error", err)
		stopped := 0
		for _, id := range victims {
			if v, ok := l.fsm.Job(id); ok && v.PreemptedBy == j.ID {
				stopped++
			}
		}
		return stopped > 0
	}
	l.log.Info("preempting lower-priority jobs", "job", structs.ShortID(j.ID), "priority", j.Spec.Priority, "victims", short)
	return true
}

// preemptionsUnderWay counts, per preempting job, its victims that are
// still stopping: running jobs with PreemptedBy set. Only jobs with an
// allocation asked to stop are looked at, so an idle pass costs little.
func (l *Leader) preemptionsUnderWay(view *fsm.StateView, jobs *jobCache) map[string]int {
	out := map[string]int{}
	seen := map[string]bool{}
	for _, al := range view.LiveAllocs {
		if al.DesiredState != structs.DesiredStop || seen[al.JobID] {
			continue
		}
		seen[al.JobID] = true
		if j := jobs.get(al.JobID); j != nil && j.State == structs.JobRunning && j.PreemptedBy != "" {
			out[j.PreemptedBy]++
		}
	}
	return out
}

// holdBehindPreemptions keeps back the ready jobs that come after the
// first queued job with a preemption under way (in the order of queued,
// the queue order), except jobs that are preempting themselves: the GPUs
// being freed are that job's.
func holdBehindPreemptions(queued, ready []*structs.Job, preempting map[string]int) (keep []*structs.Job, held []structs.JobBlocked) {
	first := slices.IndexFunc(queued, func(j *structs.Job) bool { return preempting[j.ID] > 0 })
	if first < 0 {
		return ready, nil
	}
	waitFor := queued[first]
	ahead := make(map[string]bool, first+1)
	for _, j := range queued[:first+1] {
		ahead[j.ID] = true
	}
	for _, j := range ready {
		if ahead[j.ID] || preempting[j.ID] > 0 {
			keep = append(keep, j)
			continue
		}
		held = append(held, structs.JobBlocked{JobID: j.ID, Reason: fmt.Sprintf(
			"waiting: job %s (priority %d) is preempting lower-priority jobs to run first",
			structs.ShortID(waitFor.ID), waitFor.Spec.Priority)})
	}
	return keep, held
}

// jobCache looks jobs up in the FSM at most once per pass.
type jobCache struct {
	l   *Leader
	got map[string]*structs.Job
}

func (c *jobCache) get(id string) *structs.Job {
	if j, ok := c.got[id]; ok {
		return j
	}
	j, _ := c.l.fsm.Job(id)
	c.got[id] = j
	return j
}

// running returns the jobs of the live allocations, by ID.
func (c *jobCache) running(live []*structs.Allocation) []*structs.Job {
	var out []*structs.Job
	seen := map[string]bool{}
	for _, al := range live {
		if seen[al.JobID] {
			continue
		}
		seen[al.JobID] = true
		if j := c.get(al.JobID); j != nil && j.State == structs.JobRunning {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *structs.Job) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// preemptView is the scheduler's view with this pass's placements added.
type preemptView struct {
	*fsm.StateView
	live []*structs.Allocation
}

func (v *preemptView) AllLiveAllocs() []*structs.Allocation { return v.live }

// plural renders a count with its noun: "1 preempted job", "2 preempted jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
