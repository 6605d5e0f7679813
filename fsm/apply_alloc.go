package fsm

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyAllocUpdate records allocation progress reported by the node that runs
// them. Updates for allocations of other nodes (fencing) or unknown ones are
// skipped and listed in the returned error; the others still apply. Moves
// backwards and updates to finished allocations are ignored, except that a
// pending report of a pending allocation records how far its image pull
// got (Allocation.Pull, cleared when the allocation runs or ends).
func (s *state) applyAllocUpdate(l *raft.Log) any {
	var req structs.AllocUpdateRequest
	decode(l, &req)
	var skipped []error
	for _, u := range req.Updates {
		if err := s.updateAlloc(req.NodeID, &u, l.Index); err != nil {
			skipped = append(skipped, err)
		}
	}
	return errors.Join(skipped...)
}

// updateAlloc applies one allocation update. A running report may carry a
// replica's health, kept while the allocation runs (setHealth).
func (s *state) updateAlloc(nodeID string, u *structs.AllocUpdate, index uint64) error {
	a, ok := s.allocs[u.AllocID]
	if !ok {
		return fmt.Errorf("alloc %s: %w", structs.ShortID(u.AllocID), ErrAllocNotFound)
	}
	if a.NodeID != nodeID {
		return fmt.Errorf("alloc %s: %w: it is on node %s, reported by node %s",
			structs.ShortID(a.ID), ErrWrongNode, a.NodeID, nodeID)
	}
	switch u.State {
	case structs.AllocPending:
		// Never a move forward; it may say how far the image pull got,
		// or that its port is held by another program.
		if u.PortBusy != 0 {
			s.movePort(a, u, index)
		}
		if a.State == structs.AllocPending && u.Pull != nil {
			if p := pullProgress(u.Pull); a.Pull == nil || *a.Pull != p {
				a.Pull = &p
				a.ModifyIndex = index
			}
		}
		return nil
	case structs.AllocRunning:
		if a.State == structs.AllocPending {
			a.State = structs.AllocRunning
			a.StartedAt = u.At
			a.RunAs = structs.Clip(u.RunAs, structs.MaxNameLen)
			a.Pull = nil
			a.ModifyIndex = index
			s.emitStarted(a, index)
		}
		if u.Health != nil && a.State == structs.AllocRunning && s.jobs[a.JobID].Service != "" {
			setHealth(a, u.Health, index)
		}
		return nil
	case structs.AllocSucceeded, structs.AllocFailed, structs.AllocLost, structs.AllocKilled, structs.AllocTimedOut:
		if a.Live() {
			s.endAlloc(a, u, index)
		}
		return nil
	}
	return fmt.Errorf("alloc %s: %w: unknown state %q", structs.ShortID(a.ID), ErrInvalidRequest, u.State)
}

// emitStarted records that an allocation's process runs. Its node is in
// the state: a node with live allocations is never removed, and an
// allocation is placed only on a known one.
func (s *state) emitStarted(a *structs.Allocation, index uint64) {
	j, n := s.jobs[a.JobID], s.nodes[a.NodeID]
	reason := fmt.Sprintf("attempt %d running on %s", a.Attempt, nodeName(n))
	if j.Spec.Nodes > 1 {
		reason = fmt.Sprintf("rank %d of %s", a.Rank, reason)
	}
	s.emit(index, structs.Event{Time: a.StartedAt, Kind: structs.EventJobStarted, Job: j.ID, Service: j.Service,
		Node: n.ID, NodeName: n.Name, Reason: reason})
}

// endAlloc moves a live allocation to a terminal state, stops the rest of its
// gang if it did not succeed, and decides the job once the whole attempt is over.
func (s *state) endAlloc(a *structs.Allocation, u *structs.AllocUpdate, index uint64) {
	a.State = u.State
	a.FinishedAt = u.At
	a.ExitCode = u.ExitCode
	a.Reason = u.Reason
	a.Pull = nil   // a failed pull says so in the reason
	a.Health = nil // only a running replica has a health
	a.Usage = allocUsage(u.Usage)
	a.ModifyIndex = index
	if j, ok := s.jobs[a.JobID]; ok && a.Usage != nil {
		// A new sum, never the old one changed: readers hold copies of
		// the job that share its pointer.
		var sum structs.AllocUsage
		if j.Usage != nil {
			sum = *j.Usage
		}
		sum.Add(*a.Usage)
		j.Usage = &sum
		j.ModifyIndex = index
	}
	s.release(a)
	if a.State != structs.AllocSucceeded {
		for _, o := range s.jobAllocs[a.JobID] {
			if o.Attempt == a.Attempt && o.Live() {
				stopAlloc(o, index)
			}
		}
	}
	s.decideJob(a, u.At, index)
}

// decideJob ends or requeues a running job once every allocation of its
// current attempt is terminal. A replica its service still wants goes
// back to the queue however the attempt ended (restartReplica), unless it
// was preempted, which requeues it as any job.
func (s *state) decideJob(a *structs.Allocation, at time.Time, index uint64) {
	j, ok := s.jobs[a.JobID]
	if !ok || j.State != structs.JobRunning || a.Attempt != j.Attempts {
		return
	}
	var failed *structs.Allocation   // the lowest rank that did not succeed
	var timedOut *structs.Allocation // the lowest rank stopped at the time limit
	for _, o := range s.jobAllocs[j.ID] {
		if o.Attempt != j.Attempts {
			continue
		}
		if o.Live() {
			return
		}
		if o.State != structs.AllocSucceeded && (failed == nil || o.Rank < failed.Rank) {
			failed = o
		}
		if o.State == structs.AllocTimedOut && (timedOut == nil || o.Rank < timedOut.Rank) {
			timedOut = o
		}
	}
	j.ExitCode = 0
	if failed != nil {
		j.ExitCode = failed.ExitCode
	}
	evicted := j.Evicted
	j.Evicted = ""
	switch {
	case j.StopRequested:
		s.finishJob(j, structs.JobCancelled, cancelReason(j), at, index)
	case j.PreemptedBy != "":
		s.requeuePreempted(j, at, index)
	case evicted != "" && failed != nil:
		s.requeueEvicted(j, evicted, at, index)
	case s.wantsReplica(j):
		if failed == nil {
			failed = a
		}
		s.restartReplica(j, failed, at, index)
	case failed == nil:
		s.finishJob(j, structs.JobSucceeded, "", at, index)
	case timedOut != nil:
		// Never restarted: the next attempt would run out of time too.
		j.ExitCode = timedOut.ExitCode
		s.finishJob(j, structs.JobTimedOut, failure(j, timedOut), at, index)
	case s.faulted(j) != nil && j.GPUFaults < structs.MaxFreeGPUFaultRestarts:
		// A GPU failed under the attempt: the hardware's fault, so the
		// job goes back to the queue at once without using a restart.
		j.GPUFaults++
		s.requeue(j, index)
		j.Reason = fmt.Sprintf("restarting: attempt %d stopped: %s (a GPU fault uses no restart)",
			j.Attempts, failure(j, s.faulted(j)))
		s.emitJob(index, structs.EventJobRestarted, j, at, j.Reason)
	case restartsUsed(j) < j.Spec.Restarts:
		s.requeue(j, index)
		wait := ""
		if failed.State == structs.AllocFailed && failed.GPUFault == "" {
			// The job itself failed: back off, so a crash loop does not
			// spin. A lost or stopped rank is not the job's fault.
			d := restartBackoff(restartsUsed(j) + 1)
			j.NotBefore = at.Add(d)
			wait = fmt.Sprintf(" in %s", d)
		}
		j.Reason = fmt.Sprintf("restarting%s after failure: %s (attempt %d of %d)",
			wait, failure(j, failed), restartsUsed(j)+2, j.Spec.Restarts+1)
		s.emitJob(index, structs.EventJobRestarted, j, at, j.Reason)
	default:
		s.finishJob(j, structs.JobFailed, failure(j, failed), at, index)
	}
}

// requeue puts a running job whose attempt is over back in the queue.
func (s *state) requeue(j *structs.Job, index uint64) {
	s.setJobState(j, structs.JobQueued)
	j.StartedAt = time.Time{}
	j.FinishedAt = time.Time{}
	j.NotBefore = time.Time{}
	j.ModifyIndex = index
}

// faulted returns the lowest-ranked allocation of the job's current
// attempt that was stopped for a GPU fault, or nil.
func (s *state) faulted(j *structs.Job) *structs.Allocation {
	var f *structs.Allocation
	for _, o := range s.jobAllocs[j.ID] {
		if o.Attempt == j.Attempts && o.GPUFault != "" && (f == nil || o.Rank < f.Rank) {
			f = o
		}
	}
	return f
}

// restartBackoff is the wait before the next attempt of a job after its
// nth failure in a row (a job's restart after attempt n failed, a
// replica's nth crash): 1s, 2s, 4s, ... up to a minute.
func restartBackoff(n int) time.Duration {
	if n > 6 {
		return time.Minute
	}
	return min(time.Second<<max(n-1, 0), time.Minute)
}

// failure says how an allocation ended, which is what went wrong unless
// it succeeded, naming its rank when the job has several.
func failure(j *structs.Job, a *structs.Allocation) string {
	var what string
	switch {
	case a.GPUFault != "":
		what = a.GPUFault
	case a.Reason != "":
		what = a.Reason
	case a.State == structs.AllocFailed || a.State == structs.AllocSucceeded:
		what = fmt.Sprintf("exited with code %d", a.ExitCode)
	default:
		what = string(a.State)
	}
	if j.Spec.Nodes > 1 {
		return fmt.Sprintf("rank %d %s", a.Rank, what)
	}
	return what
}

// pullProgress is a copy of a node's pull report as the state keeps it:
// the image cut to MaxImageRefLen, the byte counts not negative and the
// bytes not past a known total.
func pullProgress(p *structs.PullProgress) structs.PullProgress {
	c := *p
	c.Image = structs.Clip(c.Image, structs.MaxImageRefLen)
	c.Total = max(c.Total, 0)
	c.Bytes = max(c.Bytes, 0)
	if c.Total > 0 {
		c.Bytes = min(c.Bytes, c.Total)
	}
	return c
}

// setHealth keeps a copy of a running replica's health as its node
// reported it, the reason cut to structs.MaxAllocHealthReasonLen. A
// report that changes neither Healthy, Starting nor Reason changes nothing, so the
// kept At is when the replica became so.
func setHealth(a *structs.Allocation, h *structs.AllocHealth, index uint64) {
	c := *h
	c.Reason = structs.Clip(c.Reason, structs.MaxAllocHealthReasonLen)
	if a.Health != nil && *a.Health == (structs.AllocHealth{Healthy: c.Healthy, Starting: c.Starting, Reason: c.Reason, At: a.Health.At}) {
		return
	}
	a.Health = &c
	a.ModifyIndex = index
}

// allocUsage is a reported usage as the state keeps it: nil for none, and
// no negative count (a node's report is not trusted to be sane; its
// durations are never negative, which decoding refuses).
func allocUsage(u *structs.AllocUsage) *structs.AllocUsage {
	if u == nil {
		return nil
	}
	c := *u
	for _, f := range []*int64{&c.MemoryPeakBytes, &c.MemoryLimitBytes, &c.ThrottledPeriods, &c.OOMKills} {
		*f = max(*f, 0)
	}
	return &c
}

// movePort gives the attempt of a, rank 0 of a gang or a replica that its
// node did not start because a program skein does not run holds its
// MASTER_PORT (u.PortBusy), another port: the next in its node's range,
// from the busy one on, that no live gang there holds. Every rank gets
// it, and the move is replicated like any entry, so all ranks agree; the
// others have not started, for they wait for rank 0 to run (agent/node,
// "Ports"). Successive moves walk the range forward, so a run of busy
// ports is crossed, never circled. The report is ignored unless it is of
// the port a pending rank 0 holds now (a stale or repeated report). When
// no port is left, or another rank already runs (only a node that did not
// wait, from before the rule), the allocation fails, saying why.
func (s *state) movePort(a *structs.Allocation, u *structs.AllocUpdate, index uint64) {
	if a.State != structs.AllocPending || !a.Live() || a.Rank != 0 || a.MasterPort == 0 || a.MasterPort != u.PortBusy {
		return
	}
	n := s.nodes[a.NodeID]
	busy := fmt.Sprintf("MASTER_PORT %d is in use on node %s by a program skein does not run", a.MasterPort, nodeName(n))
	fail := func(why string) {
		s.endAlloc(a, &structs.AllocUpdate{AllocID: a.ID, State: structs.AllocFailed, ExitCode: -1,
			Reason: "start failed: " + busy + ", and " + why, At: u.At}, index)
	}
	for _, o := range s.jobAllocs[a.JobID] {
		if o.Attempt == a.Attempt && o.ID != a.ID && o.State != structs.AllocPending {
			fail(fmt.Sprintf("rank %d already started with it", o.Rank))
			return
		}
	}
	r := n.MasterPortRange()
	port := 0
	for i := 1; i < r.Len() && port == 0; i++ {
		p := r.Min + ((a.MasterPort-r.Min+i)%r.Len()+r.Len())%r.Len()
		if _, held := s.portHolder[nodePort{n.ID, p}]; !held {
			port = p
		}
	}
	if port == 0 {
		fail(fmt.Sprintf("every other port of its range %s is held by a job", r))
		return
	}
	if old := (nodePort{n.ID, a.MasterPort}); s.portHolder[old] == a.ID {
		delete(s.portHolder, old)
	}
	s.portHolder[nodePort{n.ID, port}] = a.ID
	for _, o := range s.jobAllocs[a.JobID] {
		if o.Attempt == a.Attempt {
			o.MasterPort = port
			o.ModifyIndex = index
		}
	}
	j := s.jobs[a.JobID]
	s.emit(index, structs.Event{Time: u.At, Kind: structs.EventJobPortMoved, Job: j.ID, Service: j.Service,
		Node: n.ID, NodeName: n.Name, Reason: fmt.Sprintf("%s: moved to %d", busy, port)})
}
