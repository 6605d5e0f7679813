package fsm

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyPlan commits a scheduler plan: its cancels, preemptions and
// placements (runPlan), then the reasons of the jobs it left queued. What
// committed state no longer allows is refused part by part and returned in
// the PlanResult; the rest applies.
func (s *state) applyPlan(l *raft.Log) any {
	var req structs.PlanApplyRequest
	decode(l, &req)
	res := s.runPlan(&req.Plan, req.At, l.Index, false)
	for _, b := range req.Plan.Blocked {
		j, ok := s.jobs[b.JobID]
		if ok && j.State == structs.JobQueued && j.Reason != b.Reason {
			j.Reason = b.Reason
			j.ModifyIndex = l.Index
		}
	}
	return res
}

// checkPlacement says why a placement cannot be applied, or "" when it can.
func (s *state) checkPlacement(p *structs.JobPlacement) string {
	j, reason := s.queuedJob(p.JobID)
	switch {
	case reason != "":
		return reason
	case len(p.Allocations) != j.Spec.Nodes:
		return fmt.Sprintf("plan has %d allocations, job needs %d (one per node)", len(p.Allocations), j.Spec.Nodes)
	}
	c := placementCheck{
		ranks: map[int]bool{},
		nodes: map[string]bool{},
		ids:   map[string]bool{},
		gpus:  map[string]bool{},
	}
	for i := range p.Allocations {
		if reason := s.checkAlloc(j, &p.Allocations[i], &c); reason != "" {
			return fmt.Sprintf("allocation %d: %s", i, reason)
		}
	}
	return s.checkMasterPort(p)
}

// checkMasterPort checks the gang's rendezvous port: the same on every
// rank, and, when set, in rank 0's node's range and used by no other live
// gang whose rank 0 is on that node. 0 (a plan from a leader that did not
// stamp ports) is accepted.
func (s *state) checkMasterPort(p *structs.JobPlacement) string {
	port := p.Allocations[0].MasterPort
	var rank0 *structs.Allocation
	for i := range p.Allocations {
		a := &p.Allocations[i]
		if a.MasterPort != port {
			return fmt.Sprintf("ranks have different master ports (%d and %d)", port, a.MasterPort)
		}
		if a.Rank == 0 {
			rank0 = a
		}
	}
	if port == 0 || rank0 == nil {
		return ""
	}
	n := s.nodes[rank0.NodeID]
	if r := n.MasterPortRange(); !r.Contains(port) {
		return fmt.Sprintf("master port %d is outside node %s's range %s", port, nodeName(n), r)
	}
	if holder, ok := s.portHolder[nodePort{n.ID, port}]; ok {
		return fmt.Sprintf("master port %d on node %s is used by job %s", port, nodeName(n), structs.ShortID(s.allocs[holder].JobID))
	}
	return ""
}

// placementCheck is what the allocations of one placement have claimed so far.
type placementCheck struct {
	ranks map[int]bool
	nodes map[string]bool
	ids   map[string]bool
	gpus  map[string]bool
}

// checkAlloc checks one allocation of a placement and records its claims.
func (s *state) checkAlloc(j *structs.Job, a *structs.Allocation, c *placementCheck) string {
	spec := &j.Spec
	switch {
	case a.ID == "":
		return "empty allocation id"
	case s.allocs[a.ID] != nil:
		return fmt.Sprintf("allocation id %s already exists", a.ID)
	case c.ids[a.ID]:
		return fmt.Sprintf("allocation id %s used twice", a.ID)
	case a.JobID != "" && a.JobID != j.ID:
		return fmt.Sprintf("names job %s, not %s", a.JobID, j.ID)
	case a.Rank < 0 || a.Rank >= spec.Nodes:
		return fmt.Sprintf("rank %d is out of range 0..%d", a.Rank, spec.Nodes-1)
	case c.ranks[a.Rank]:
		return fmt.Sprintf("rank %d placed twice", a.Rank)
	case a.CPUs != 0 && a.CPUs != spec.CPUs:
		return fmt.Sprintf("asks for %d CPUs, job spec says %d", a.CPUs, spec.CPUs)
	case a.MemoryMiB != 0 && a.MemoryMiB != int64(spec.MemoryMiB):
		return fmt.Sprintf("asks for %d MiB memory, job spec says %d", a.MemoryMiB, spec.MemoryMiB)
	case len(a.GPUs) != spec.GPUs:
		return fmt.Sprintf("has %d GPUs, job needs %d per node", len(a.GPUs), spec.GPUs)
	}
	c.ids[a.ID] = true
	c.ranks[a.Rank] = true

	n, ok := s.nodes[a.NodeID]
	switch {
	case !ok:
		return fmt.Sprintf("node %s not found", a.NodeID)
	case n.Status != structs.NodeReady:
		return fmt.Sprintf("node %s is %s, not ready", nodeName(n), n.Status)
	case n.Drain != nil:
		return fmt.Sprintf("node %s is draining", nodeName(n))
	case c.nodes[n.ID]:
		return fmt.Sprintf("node %s is used by two ranks", nodeName(n))
	}
	c.nodes[n.ID] = true
	if reason := s.checkExclusive(j, n); reason != "" {
		return reason
	}

	for _, uuid := range a.GPUs {
		if reason := s.checkGPU(n, uuid, c); reason != "" {
			return reason
		}
		c.gpus[uuid] = true
	}

	used := s.nodeUsed[n.ID]
	if n.CPUs > 0 && used.cpus+spec.CPUs > n.CPUs {
		return fmt.Sprintf("node %s has %d of %d CPUs free, job needs %d", nodeName(n), max(n.CPUs-used.cpus, 0), n.CPUs, spec.CPUs)
	}
	if n.MemoryMiB > 0 && used.memoryMiB+int64(spec.MemoryMiB) > n.MemoryMiB {
		return fmt.Sprintf("node %s has %d of %d MiB memory free, job needs %d",
			nodeName(n), max(n.MemoryMiB-used.memoryMiB, 0), n.MemoryMiB, spec.MemoryMiB)
	}
	return ""
}

// checkExclusive checks that a placement shares no node with an
// --exclusive job: an exclusive job's node runs no live allocation, and
// no job joins a node a live allocation of an exclusive job holds. It
// names the lowest allocation ID in the way.
func (s *state) checkExclusive(j *structs.Job, n *structs.Node) string {
	var in string
	for id, a := range s.nodeLive[n.ID] {
		if (j.Spec.Exclusive || a.Exclusive) && (in == "" || id < in) {
			in = id
		}
	}
	switch {
	case in == "":
		return ""
	case j.Spec.Exclusive:
		return fmt.Sprintf("node %s runs job %s, and the job is exclusive", nodeName(n), structs.ShortID(s.allocs[in].JobID))
	}
	return fmt.Sprintf("node %s is held by exclusive job %s", nodeName(n), structs.ShortID(s.allocs[in].JobID))
}

// checkGPU checks that one GPU of an allocation exists on its node, is
// placeable (healthy, not cordoned, not used by foreign processes) and is
// free.
func (s *state) checkGPU(n *structs.Node, uuid string, c *placementCheck) string {
	if c.gpus[uuid] {
		return fmt.Sprintf("GPU %s given twice", uuid)
	}
	gpu := findGPU(n, uuid)
	if gpu == nil {
		return fmt.Sprintf("GPU %s is not on node %s", uuid, nodeName(n))
	}
	if ok, why := gpu.Placeable(); !ok {
		return fmt.Sprintf("GPU %s on node %s is %s", uuid, nodeName(n), why)
	}
	if holder, ok := s.gpuHolder[uuid]; ok {
		return fmt.Sprintf("GPU %s on node %s is held by allocation %s of job %s",
			uuid, nodeName(n), structs.ShortID(holder), structs.ShortID(s.allocs[holder].JobID))
	}
	return ""
}

// place creates the allocations of a checked placement and starts the
// job's next attempt.
func (s *state) place(p *structs.JobPlacement, at time.Time, index uint64) {
	j := s.jobs[p.JobID]
	attempt := j.Attempts + 1
	for _, pa := range p.Allocations {
		s.addAlloc(&structs.Allocation{
			ID:           pa.ID,
			JobID:        j.ID,
			NodeID:       pa.NodeID,
			Rank:         pa.Rank,
			Attempt:      attempt,
			GPUs:         append([]string{}, pa.GPUs...),
			MasterPort:   pa.MasterPort,
			CPUs:         j.Spec.CPUs,
			MemoryMiB:    int64(j.Spec.MemoryMiB),
			Exclusive:    j.Spec.Exclusive,
			State:        structs.AllocPending,
			DesiredState: structs.DesiredRun,
			CreatedAt:    at,
			CreateIndex:  index,
			ModifyIndex:  index,
		})
	}
	s.setJobState(j, structs.JobRunning)
	j.Attempts = attempt
	j.StartedAt = at
	j.FinishedAt = time.Time{}
	j.Reason = ""
	j.ModifyIndex = index
	e := structs.Event{Time: at, Kind: structs.EventJobPlaced, Job: j.ID, Service: j.Service, Reason: s.placedReason(j, p)}
	if len(p.Allocations) == 1 {
		n := s.nodes[p.Allocations[0].NodeID]
		e.Node, e.NodeName = n.ID, n.Name
	}
	s.emit(index, e)
}

// nodeName is how reasons name a node: its name, else its ID.
func nodeName(n *structs.Node) string {
	if n.Name != "" {
		return n.Name
	}
	return n.ID
}
