package leader

import (
	"fmt"
	"hash/fnv"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// AssignMasterPorts gives every placement of a plan its MASTER_PORT, the
// same on every rank: a port of rank 0's node's range (Node.MasterPorts)
// that no live gang with rank 0 on that node uses, nor an earlier
// placement of this plan. The search starts at a point derived from the
// job and attempt, so consecutive jobs do not reuse a port that may still
// linger in TIME_WAIT. A placement whose rank-0 node has no free port
// left is moved to Blocked. The FSM checks the same rule on commit.
func AssignMasterPorts(view *fsm.StateView, plan *structs.Plan) {
	nodes := make(map[string]*structs.Node, len(view.Nodes))
	for _, n := range view.Nodes {
		nodes[n.ID] = n
	}
	used := map[string]map[int]bool{} // rank 0's node ID -> ports taken
	take := func(nodeID string, port int) {
		if used[nodeID] == nil {
			used[nodeID] = map[int]bool{}
		}
		used[nodeID][port] = true
	}
	for _, a := range view.LiveAllocs {
		if a.Rank == 0 && a.MasterPort != 0 {
			take(a.NodeID, a.MasterPort)
		}
	}
	kept := plan.Placements[:0]
	for _, p := range plan.Placements {
		var rank0 *structs.Allocation
		for i := range p.Allocations {
			if p.Allocations[i].Rank == 0 {
				rank0 = &p.Allocations[i]
			}
		}
		n := nodes[rank0.NodeID]
		port := pickPort(n.MasterPortRange(), used[n.ID], p.JobID, rank0.Attempt)
		if port == 0 {
			plan.Blocked = append(plan.Blocked, structs.JobBlocked{JobID: p.JobID,
				Reason: fmt.Sprintf("no free MASTER_PORT on node %s: all of %s are in use", n.Name, n.MasterPortRange())})
			continue
		}
		take(n.ID, port)
		for i := range p.Allocations {
			p.Allocations[i].MasterPort = port
		}
		kept = append(kept, p)
	}
	plan.Placements = kept
}

// pickPort returns the first port of r not in used, searching from a point
// derived from the job and attempt, or 0 when every port is used.
func pickPort(r structs.PortRange, used map[int]bool, jobID string, attempt int) int {
	start := int(portHash(jobID, attempt) % uint32(r.Len()))
	for i := range r.Len() {
		port := r.Min + (start+i)%r.Len()
		if !used[port] {
			return port
		}
	}
	return 0
}

func portHash(jobID string, attempt int) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", jobID, attempt)
	return h.Sum32()
}
