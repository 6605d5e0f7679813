package sched

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// DrainState is what NextDrainStep reads of the cluster state (the FSM's
// queries).
type DrainState interface {
	// NodeLiveAllocs returns the allocations pending or running on a node.
	NodeLiveAllocs(nodeID string) []*structs.Allocation
	// Job returns a job by ID.
	Job(id string) (*structs.Job, bool)
	// Allocs returns a job's allocations, live and ended.
	Allocs(jobID string) []*structs.Allocation
	// Service returns a service by name.
	Service(name string) (*structs.Service, bool)
}

// NextDrainStep decides the next step of node n's drain at now; ok is
// false when there is nothing to do until the state changes (or the
// deadline comes). For each job with an allocation on the node that is
// not already stopping, in the order of its allocations:
//   - a replica its service wants gets a replacement (Replace), and stops
//     (Stop) once that replacement is available: running, not stopping,
//     healthy (or its service has no check); past the deadline, or
//     forced, it stops without waiting;
//   - a restartable job (preemptible, or with a restart left) is evicted
//     at once: stopped with its signal and grace, it runs again elsewhere
//     without using a restart;
//   - any other job runs out, or is stopped (Kill) past the deadline or
//     when forced.
//
// With nothing left on the node the step is Done. The state re-checks
// each step when it applies it.
func NextDrainStep(st DrainState, n *structs.Node, now time.Time) (structs.NodeDrainStepRequest, bool) {
	step := structs.NodeDrainStepRequest{NodeID: n.ID, At: now}
	d := n.Drain
	if d == nil {
		return step, false
	}
	late := d.Force || (!d.Deadline.IsZero() && !now.Before(d.Deadline))
	live := st.NodeLiveAllocs(n.ID)
	if len(live) == 0 {
		step.Done = !d.Drained()
		return step, step.Done
	}
	seen := map[string]bool{}
	for _, a := range live {
		j, ok := st.Job(a.JobID)
		if !ok || seen[j.ID] || j.StopRequested || a.DesiredState == structs.DesiredStop || a.Attempt != j.Attempts {
			continue
		}
		seen[j.ID] = true
		switch {
		case j.Service != "":
			svc, ok := st.Service(j.Service)
			if !ok || svc.Deleted {
				continue
			}
			rep, hasRep := st.Job(j.ReplacedBy)
			switch {
			case late || (hasRep && replicaServes(st, svc, rep)):
				step.Stop = append(step.Stop, j.ID)
			case !hasRep || rep.State.Terminal() || rep.StopRequested:
				step.Replace = append(step.Replace, j.ID)
			}
		case j.State != structs.JobRunning || j.PreemptedBy != "" || j.Evicted != "":
		case j.Restartable():
			step.Evict = append(step.Evict, j.ID)
		case late:
			step.Kill = append(step.Kill, j.ID)
		}
		if len(step.Replace)+len(step.Stop)+len(step.Evict)+len(step.Kill) >= structs.MaxDrainStep {
			break
		}
	}
	return step, !step.Empty()
}

// replicaServes reports whether replica job j of svc serves: its current
// allocation runs, is not being stopped, and is healthy (or no check
// judges it).
func replicaServes(st DrainState, svc *structs.Service, j *structs.Job) bool {
	if j.State.Terminal() || j.StopRequested {
		return false
	}
	for _, a := range st.Allocs(j.ID) {
		if a.Attempt != j.Attempts || a.State != structs.AllocRunning || a.DesiredState == structs.DesiredStop {
			continue
		}
		if a.Health != nil {
			return a.Health.Healthy
		}
		return svc.Spec.Health == nil
	}
	return false
}
