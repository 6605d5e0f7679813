package fsm

import (
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// withPort sets one MASTER_PORT on every allocation of a placement.
func withPort(port int, allocs ...structs.Allocation) []structs.Allocation {
	for i := range allocs {
		allocs[i].MasterPort = port
	}
	return allocs
}

func TestFSM_Plan_MasterPortIsUniqueOnRankZerosNode(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 0))
	h.register(node("n2", 0))
	for _, id := range []string{"a", "b", "c", "d"} {
		h.submit(id, spec(2, 0))
	}
	h.place("a", withPort(29501, alloc("a0", "n1", 0), alloc("a1", "n2", 1))...)
	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{
		// Same port, rank 0 on the same node: refused.
		{JobID: "b", Allocations: withPort(29501, alloc("b0", "n1", 0), alloc("b1", "n2", 1))},
		// Same port with rank 0 on the other node: fine (a's rank 1 does
		// not listen on it).
		{JobID: "c", Allocations: withPort(29501, alloc("c0", "n2", 0), alloc("c1", "n1", 1))},
	}})
	if len(res.Rejected) != 1 || res.Rejected[0].JobID != "b" || !strings.Contains(res.Rejected[0].Reason, "master port 29501 on node name-n1 is used by job a") {
		t.Fatalf("rejected %+v, want b refused for a's port", res.Rejected)
	}
	if a := h.alloc("c1"); a.MasterPort != 29501 {
		t.Fatalf("rank 1 of c has master port %d, want 29501 like its rank 0", a.MasterPort)
	}
	// Once a has ended, its port is free again.
	h.mustUpdate("n1", "a0", structs.AllocSucceeded, 0, "")
	h.mustUpdate("n2", "a1", structs.AllocSucceeded, 0, "")
	h.place("b", withPort(29501, alloc("b0", "n1", 0), alloc("b1", "n2", 1))...)
	if err := checkIndexes(h.f.st); err != nil {
		t.Fatal(err)
	}
}

func TestFSM_Plan_RejectsMasterPortsThatDisagreeOrLeaveTheRange(t *testing.T) {
	h := newHarness(t)
	n1 := node("n1", 0)
	n1.MasterPorts = structs.PortRange{Min: 40000, Max: 40009}
	h.register(n1)
	h.register(node("n2", 0))
	h.submit("j", spec(2, 0))
	cases := []struct {
		allocs []structs.Allocation
		want   string
	}{
		{[]structs.Allocation{alloc("x0", "n1", 0), alloc("x1", "n2", 1)}, ""},
		{withPort(29500, alloc("x0", "n1", 0), alloc("x1", "n2", 1)), "master port 29500 is outside node name-n1's range 40000-40009"},
		{append(withPort(40000, alloc("x0", "n1", 0)), alloc("x1", "n2", 1)), "ranks have different master ports (40000 and 0)"},
	}
	for _, c := range cases[1:] {
		res := h.plan(structs.Plan{Placements: []structs.JobPlacement{{JobID: "j", Allocations: c.allocs}}})
		if len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Reason, c.want) {
			t.Errorf("rejected %+v, want %q", res.Rejected, c.want)
		}
	}
	// A plan without ports (from a leader that did not stamp them) applies.
	h.place("j", cases[0].allocs...)
}

func TestFSM_Register_RefusesABadPortRange(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 0)
	n.MasterPorts = structs.PortRange{Min: 80, Max: 90}
	err := h.applyErr(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: h.at()})
	if err == nil || !strings.Contains(err.Error(), "master ports: port range 80-90") {
		t.Fatalf("register: %v, want the port range refused", err)
	}
}
