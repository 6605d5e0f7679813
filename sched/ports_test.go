package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestAssignMasterPorts_UniqueOnRankZerosNodeAndSameOnEveryRank(t *testing.T) {
	n1 := &structs.Node{ID: "n1", Name: "one", MasterPorts: structs.PortRange{Min: 40000, Max: 40002}}
	n2 := &structs.Node{ID: "n2", Name: "two"}
	live := []*structs.Allocation{{ID: "old", JobID: "old", NodeID: "n1", Rank: 0, MasterPort: 40001}}
	gang := func(job, rank0, rank1 string) structs.JobPlacement {
		return structs.JobPlacement{JobID: job, Allocations: []structs.Allocation{
			{JobID: job, NodeID: rank0, Rank: 0, Attempt: 1}, {JobID: job, NodeID: rank1, Rank: 1, Attempt: 1}}}
	}
	plan := structs.Plan{Placements: []structs.JobPlacement{
		gang("a", "n1", "n2"), gang("b", "n1", "n2"), gang("c", "n1", "n2"), gang("d", "n2", "n1"),
	}}
	assignMasterPorts([]*structs.Node{n1, n2}, live, &plan, func(string) bool { return true })

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

func TestPickPort_StartsFromTheJobsHashAndWrapsAround(t *testing.T) {
	r := structs.PortRange{Min: 40000, Max: 40009}
	start := pickPort(r, nil, "n1", "job", 1)
	if start != r.Min+int(portHash("job", 1)%10) {
		t.Fatalf("first pick %d, want the hash's port in %s", start, r)
	}
	before := r.Min + (start-r.Min+9)%10 // the port just before start, wrapping
	used := map[nodePort]bool{}
	for p := r.Min; p <= r.Max; p++ {
		used[nodePort{"n1", p}] = p != before
		used[nodePort{"n2", p}] = true
	}
	if got := pickPort(r, used, "n1", "job", 1); got != before {
		t.Fatalf("pick %d, want %d, the only free port, found by wrapping around", got, before)
	}
	used[nodePort{"n1", before}] = true
	if got := pickPort(r, used, "n1", "job", 1); got != 0 {
		t.Fatalf("pick %d from a full range, want 0", got)
	}
}

// LegacyMasterPort is what nodes derive for allocations committed without
// a port: FNV-1a (32 bits) of "job/attempt" spread over 29500-39499. It
// must never change, or a node would compute another port than its peers.
func TestLegacyMasterPort_IsFNVOfJobAndAttempt(t *testing.T) {
	for _, tc := range []struct {
		job     string
		attempt int
	}{{"abc", 1}, {"3f2a1b0c9d8e7f60", 2}, {"arr-12", 7}} {
		h := uint32(2166136261) // the FNV-1a offset basis
		for _, c := range []byte(fmt.Sprintf("%s/%d", tc.job, tc.attempt)) {
			h ^= uint32(c)
			h *= 16777619 // the FNV prime
		}
		if got, want := LegacyMasterPort(tc.job, tc.attempt), 29500+int(h%10000); got != want {
			t.Errorf("LegacyMasterPort(%q, %d) = %d, want %d", tc.job, tc.attempt, got, want)
		}
	}
}

func TestDecide_AReplicaWithNoFreePortOnItsNodeWaits(t *testing.T) {
	n := gpuNode("n1", 8, "H100", 80, func(n *structs.Node) { n.MasterPorts = structs.PortRange{Min: 40000, Max: 40000} })
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{n}}, queued: []*structs.Job{replica("s", 0, 1), replica("s", 1, 1)}}
	d := Decide(v, Inputs{Now: t0})
	a, b := structs.ReplicaJobID("s", 0), structs.ReplicaJobID("s", 1)
	if len(d.Plan.Placements) != 1 || d.Plan.Placements[0].Allocations[0].MasterPort != 40000 {
		t.Fatalf("placements %+v, want one replica on port 40000", d.Plan.Placements)
	}
	waits := b
	if d.Plan.Placements[0].JobID == b {
		waits = a
	}
	if got := blockedReason(d.Plan, waits); !strings.HasPrefix(got, "no free MASTER_PORT on node n1") {
		t.Fatalf("the other replica's reason %q, want no free port", got)
	}
}

// A job of one node that is no replica is given no port: it holds none of
// the range, and waits for none (the 1-node `true` failed on a
// port it never used).
func TestDecide_AOneNodeJobTakesNoPort(t *testing.T) {
	n := gpuNode("n1", 8, "H100", 80, func(n *structs.Node) { n.MasterPorts = structs.PortRange{Min: 40000, Max: 40000} })
	v := fakeView{fakeState: fakeState{nodes: []*structs.Node{n}}, queued: []*structs.Job{job("a", 1), job("b", 1, prio(-1)), replica("c", 0, 1)}}
	d := Decide(v, Inputs{Now: t0})
	if len(d.Plan.Placements) != 3 {
		t.Fatalf("placements %+v, blocked %+v: want all three placed", d.Plan.Placements, d.Plan.Blocked)
	}
	for _, p := range d.Plan.Placements {
		want := 0
		if p.JobID == structs.ReplicaJobID("c", 0) {
			want = 40000
		}
		if got := p.Allocations[0].MasterPort; got != want {
			t.Errorf("job %s was given port %d, want %d", p.JobID, got, want)
		}
	}
}
