package leader

import (
	"fmt"
	"time"

	"github.com/skein-dev/skein/structs"
)

// scheduleLoop runs a scheduling pass whenever the state changes, a job's
// restart backoff ends or gossip says something that changes what may be
// placed, until stop closes.
func (l *Leader) scheduleLoop(stop <-chan struct{}, since time.Time) {
	for {
		_, changed := l.fsm.Watch()
		rejected, wake, err := l.schedule()
		if err != nil || rejected {
			// A failed write, or placements the FSM refused: give the
			// state a moment to move on instead of spinning on it.
			if err != nil {
				l.log.Warn("scheduling pass failed", "error", err)
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		// Wake for the next state change, or when a job's restart
		// backoff ends.
		backoff := time.NewTimer(time.Until(wake))
		if wake.IsZero() {
			backoff.Stop()
		}
		select {
		case <-stop:
			backoff.Stop()
			return
		case <-changed:
		case <-backoff.C:
		case <-l.kick:
		}
		backoff.Stop()
	}
}

// schedule runs one pass: every queued job, one plan, committed in entries
// of bounded size (applyPlan). The FSM re-checks the plan on committed
// state, so a stale view can only cost a rejected placement, never a
// double-used GPU. It reports whether the FSM rejected any placement, and
// when the earliest job still in its restart backoff becomes placeable
// (zero: none waits).
func (l *Leader) schedule() (rejected bool, wake time.Time, err error) {
	view := l.fsm.State()
	nowT := time.Now()
	var ready []*structs.Job
	for _, j := range view.Queued {
		if j.NotBefore.After(nowT) {
			if wake.IsZero() || j.NotBefore.Before(wake) {
				wake = j.NotBefore
			}
			continue
		}
		ready = append(ready, j)
	}
	ready, waiting := l.gateDependencies(ready)
	ready, capped := capArrays(ready, view.LiveAllocs)
	waiting = append(waiting, capped...)
	if len(ready) == 0 && len(waiting) == 0 {
		return false, wake, nil
	}
	l.holdBackSilentNodes(view.Nodes)
	l.holdBackGossipUnhealthy(view.Nodes)
	plan := l.placeAndPreempt(view, ready, nowT)
	plan.Blocked = append(plan.Blocked, waiting...)
	at := now()
	for i := range plan.Placements {
		for j := range plan.Placements[i].Allocations {
			alloc := &plan.Placements[i].Allocations[j]
			alloc.ID = structs.NewID()
			alloc.CreatedAt = at
		}
	}
	AssignMasterPorts(view, &plan)
	plan.Blocked = changedReasons(view.Queued, plan.Blocked)
	if len(plan.Placements) == 0 && len(plan.Blocked) == 0 {
		return false, wake, nil
	}
	rejected, err = l.applyPlan(plan, at)
	return rejected, wake, err
}

// gateDependencies keeps back jobs whose --after dependencies have not
// ended, with a reason, and cancels those whose dependency ended in a way
// that can never satisfy them (not succeeded, for :ok).
func (l *Leader) gateDependencies(jobs []*structs.Job) (ready []*structs.Job, waiting []structs.JobBlocked) {
	for _, j := range jobs {
		var wait, never string
		for _, d := range j.Spec.After {
			dep, ok := l.fsm.Job(d.JobID)
			switch {
			case !ok:
				never = fmt.Sprintf("dependency %s does not exist", structs.ShortID(d.JobID))
			case !dep.State.Terminal():
				wait = fmt.Sprintf("waiting for job %s (%s)", structs.ShortID(d.JobID), dep.State)
			case d.Condition == structs.AfterOK && dep.State != structs.JobSucceeded:
				never = fmt.Sprintf("dependency %s %s", structs.ShortID(d.JobID), dep.State)
			}
			if never != "" {
				break
			}
		}
		switch {
		case never != "":
			_, err := l.cfg.Apply(structs.JobCancelType, structs.JobCancelRequest{JobID: j.ID, Reason: never, At: now()})
			if err != nil {
				l.log.Warn("cancel a job whose dependency failed", "job", structs.ShortID(j.ID), "error", err)
			}
		case wait != "":
			waiting = append(waiting, structs.JobBlocked{JobID: j.ID, Reason: wait})
		default:
			ready = append(ready, j)
		}
	}
	return ready, waiting
}

// capArrays keeps back tasks of job arrays that already run as many tasks
// as their --array ...%N allows, counting the ones let through this pass.
func capArrays(jobs []*structs.Job, live []*structs.Allocation) (ready []*structs.Job, waiting []structs.JobBlocked) {
	running := map[string]map[string]bool{} // array ID -> running task IDs
	for _, al := range live {
		if arr := structs.ArrayOf(al.JobID); arr != "" {
			if running[arr] == nil {
				running[arr] = map[string]bool{}
			}
			running[arr][al.JobID] = true
		}
	}
	for _, j := range jobs {
		a := j.Spec.Array
		if j.ArrayID == "" || a == nil || a.MaxRunning == 0 {
			ready = append(ready, j)
			continue
		}
		if len(running[j.ArrayID]) >= a.MaxRunning {
			waiting = append(waiting, structs.JobBlocked{JobID: j.ID,
				Reason: fmt.Sprintf("array %s runs its limit of %d tasks", structs.ShortID(j.ArrayID), a.MaxRunning)})
			continue
		}
		if running[j.ArrayID] == nil {
			running[j.ArrayID] = map[string]bool{}
		}
		running[j.ArrayID][j.ID] = true
		ready = append(ready, j)
	}
	return ready, waiting
}

// holdBackSilentNodes keeps work off ready nodes the leader has not heard
// from lately: one that died moments ago, or any node in the first instant
// of a new leadership, before its heartbeats arrive. The view is a copy;
// the committed status does not change, and the scheduler names the reason.
func (l *Leader) holdBackSilentNodes(nodes []*structs.Node) {
	recent := 4 * l.cfg.HeartbeatInterval
	nowT := time.Now()
	for _, n := range nodes {
		if n.ID != l.cfg.NodeID && n.Status == structs.NodeReady && !l.heardWithin(n.ID, recent, nowT) {
			n.Status = nodeUnresponsive
		}
	}
}

// holdBackGossipUnhealthy keeps work off GPUs a node announces as unhealthy
// by gossip before its health report has committed. The view is a copy;
// the committed health does not change, and the FSM re-checks every plan.
func (l *Leader) holdBackGossipUnhealthy(nodes []*structs.Node) {
	masks := l.cfg.GossipUnhealthy()
	if len(masks) == 0 {
		return
	}
	for _, n := range nodes {
		mask := masks[n.ID]
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if g.Healthy && g.Index >= 0 && g.Index < 64 && mask&(1<<g.Index) != 0 {
				g.Healthy, g.Reason = false, "reported unhealthy by its node"
			}
		}
	}
}

// changedReasons keeps only the blocked entries whose reason differs from
// what the job already says, so an idle cluster writes nothing.
func changedReasons(queued []*structs.Job, blocked []structs.JobBlocked) []structs.JobBlocked {
	current := make(map[string]string, len(queued))
	for _, j := range queued {
		current[j.ID] = j.Reason
	}
	out := blocked[:0]
	for _, b := range blocked {
		if current[b.JobID] != b.Reason {
			out = append(out, b)
		}
	}
	return out
}
