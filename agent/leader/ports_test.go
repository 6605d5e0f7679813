package leader

import (
	"testing"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

func TestAssignMasterPorts_UniqueOnRankZerosNodeAndSameOnEveryRank(t *testing.T) {
	n1 := &structs.Node{ID: "n1", Name: "one", MasterPorts: structs.PortRange{Min: 40000, Max: 40002}}
	n2 := &structs.Node{ID: "n2", Name: "two"}
	view := &fsm.StateView{
		Nodes:      []*structs.Node{n1, n2},
		LiveAllocs: []*structs.Allocation{{ID: "old", JobID: "old", NodeID: "n1", Rank: 0, MasterPort: 40001}},
	}
	gang := func(job, rank0, rank1 string) structs.JobPlacement {
		return structs.JobPlacement{JobID: job, Allocations: []structs.Allocation{
			{JobID: job, NodeID: rank0, Rank: 0, Attempt: 1}, {JobID: job, NodeID: rank1, Rank: 1, Attempt: 1}}}
	}
	plan := structs.Plan{Placements: []structs.JobPlacement{
		gang("a", "n1", "n2"), gang("b", "n1", "n2"), gang("c", "n1", "n2"), gang("d", "n2", "n1"),
	}}
	AssignMasterPorts(view, &plan)

	if len(plan.Placements) != 3 || len(plan.Blocked) != 1 || plan.Blocked[0].JobID != "c" ||
		plan.Blocked[0].Reason != "no free MASTER_PORT on node one: all of 40000-40002 are in use" {
		t.Fatalf("placements %+v, blocked %+v: want c blocked for want of a port", plan.Placements, plan.Blocked)
	}
	seen := map[int]string{40001: "old"}
	for _, p := range plan.Placements {
		port := p.Allocations[0].MasterPort
		if p.Allocations[1].MasterPort != port {
			t.Errorf("job %s: ranks got ports %d and %d", p.JobID, port, p.Allocations[1].MasterPort)
		}
		r := structs.DefaultMasterPorts
		if p.Allocations[0].NodeID == "n1" {
			r = n1.MasterPorts
			if other, ok := seen[port]; ok {
				t.Errorf("jobs %s and %s share port %d on n1", other, p.JobID, port)
			}
			seen[port] = p.JobID
		}
		if !r.Contains(port) {
			t.Errorf("job %s: port %d outside %s", p.JobID, port, r)
		}
	}
}
