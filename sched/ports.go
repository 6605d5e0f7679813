package sched

import (
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/skein-dev/skein/structs"
)

// assignMasterPorts gives every placement of plan whose job needs one
// (needs, Job.NeedsMasterPort) its MASTER_PORT, the same on every rank: a
// port of rank 0's node's range (Node.MasterPortRange) that no live gang
// with rank 0 on that node uses, nor an earlier placement of the plan.
// The search starts at a point derived from the job and attempt, so
// consecutive jobs do not reuse a port that may still linger in
// TIME_WAIT. A placement whose rank-0 node has no free port left moves to
// plan.Blocked. The FSM checks the same rule on commit. Other jobs get no
// port here: their node finds one free as they start, and no port of the
// range is held for them.
func assignMasterPorts(nodes []*structs.Node, live []*structs.Allocation, plan *structs.Plan, needs func(jobID string) bool) {
	byID := make(map[string]*structs.Node, len(nodes))
	for _, n := range nodes {
		if n != nil {
			byID[n.ID] = n
		}
	}
	used := make(map[nodePort]bool, len(live)+len(plan.Placements))
	for _, a := range live {
		if a.Rank == 0 && a.MasterPort != 0 {
			used[nodePort{a.NodeID, a.MasterPort}] = true
		}
	}
	kept := plan.Placements[:0]
	for _, p := range plan.Placements {
		if !needs(p.JobID) {
			kept = append(kept, p)
			continue
		}
		rank0 := &p.Allocations[0]
		for i := range p.Allocations {
			if p.Allocations[i].Rank == 0 {
				rank0 = &p.Allocations[i]
			}
		}
		n := byID[rank0.NodeID]
		ports := n.MasterPortRange()
		port := pickPort(ports, used, n.ID, p.JobID, rank0.Attempt)
		if port == 0 {
			plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: p.JobID, Reason: fmt.Sprintf(
				"no free MASTER_PORT on node %s: all of %s are in use", n.Name, ports)})
			continue
		}
		used[nodePort{n.ID, port}] = true
		for i := range p.Allocations {
			p.Allocations[i].MasterPort = port
		}
		kept = append(kept, p)
	}
	plan.Placements = kept
}

// nodePort is a MASTER_PORT taken on a rank-0 node.
type nodePort struct {
	node string
	port int
}

// pickPort returns the first port of r not used on the node, searching
// from a point derived from the job and attempt, or 0 when every port is
// used.
func pickPort(r structs.PortRange, used map[nodePort]bool, nodeID, jobID string, attempt int) int {
	start := int(portHash(jobID, attempt) % uint32(r.Len()))
	for i := range r.Len() {
		port := r.Min + (start+i)%r.Len()
		if !used[nodePort{nodeID, port}] {
			return port
		}
	}
	return 0
}

// The range LegacyMasterPort spreads ports over.
const (
	legacyMasterPortBase  = 29500
	legacyMasterPortCount = 10000
)

// LegacyMasterPort is the MASTER_PORT of a gang whose allocations were
// committed without one (by a leader from before ports were stamped):
// spread over 29500-39499 by job and attempt, the same on every rank, from
// the same hash the leader's search starts from.
func LegacyMasterPort(jobID string, attempt int) int {
	return legacyMasterPortBase + int(portHash(jobID, attempt)%legacyMasterPortCount)
}

// portHash is the one hash of a job's attempt that ports derive from:
// FNV-1a (32 bits) of "<job ID>/<attempt>". It allocates nothing, as it
// runs once per placement.
func portHash(jobID string, attempt int) uint32 {
	var buf [64]byte
	b := append(buf[:0], jobID...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(attempt), 10)
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}
