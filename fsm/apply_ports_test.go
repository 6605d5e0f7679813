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

// portBusy reports a's port held by another program, as its node does.
func (h *harness) portBusy(nodeID, allocID string, port int) {
	h.t.Helper()
	if err := h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: nodeID,
		Updates: []structs.AllocUpdate{{AllocID: allocID, State: structs.AllocPending, PortBusy: port, At: h.at()}}}); err != nil {
		h.t.Fatalf("port busy: %v", err)
	}
}

// A port rank 0's node found held by another program moves, for every rank
// of the attempt, to the next port of the range no live gang holds; a
// stale report changes nothing; and the move says so in an event.
func TestFSM_PortBusy_MovesEveryRankToTheNextFreePort(t *testing.T) {
	h := newHarness(t)
	n1 := node("n1", 0)
	n1.MasterPorts = structs.PortRange{Min: 40000, Max: 40003}
	h.register(n1)
	h.register(node("n2", 0))
	h.submit("a", spec(2, 0))
	h.submit("b", spec(2, 0))
	h.place("b", withPort(40002, alloc("b0", "n1", 0), alloc("b1", "n2", 1))...)
	h.place("a", withPort(40001, alloc("a0", "n1", 0), alloc("a1", "n2", 1))...)
	before := h.idx
	h.portBusy("n1", "a0", 40001)
	for _, id := range []string{"a0", "a1"} {
		if a := h.alloc(id); a.MasterPort != 40003 || a.State != structs.AllocPending {
			t.Fatalf("%s: port %d, %s; want 40003 (40002 is b's), still pending", id, a.MasterPort, a.State)
		}
	}
	ev := h.eventsFrom(before)
	if len(ev) != 1 || ev[0].Kind != structs.EventJobPortMoved || ev[0].Job != "a" ||
		ev[0].Reason != "MASTER_PORT 40001 is in use on node name-n1 by a program skein does not run: moved to 40003" {
		t.Fatalf("events %+v, want one job-port-moved", ev)
	}
	// A report of the port it had is stale: nothing moves.
	hash := h.f.Hash()
	h.portBusy("n1", "a0", 40001)
	if h.f.Hash() != hash {
		t.Fatal("a stale port report changed the state")
	}
	// The next busy port wraps around the range, past b's, to 40000.
	h.portBusy("n1", "a0", 40003)
	if a := h.alloc("a1"); a.MasterPort != 40000 {
		t.Fatalf("a1 moved to %d, want 40000", a.MasterPort)
	}
	// The port a held is free for a new gang; the one it holds is not.
	h.submit("c", spec(2, 0))
	if reason := h.placeRejected("c", withPort(40000, alloc("c0", "n1", 0), alloc("c1", "n2", 1))...); !strings.Contains(reason, "used by job a") {
		t.Fatalf("c on a's new port: %q, want refused", reason)
	}
	h.place("c", withPort(40001, alloc("c0", "n1", 0), alloc("c1", "n2", 1))...)
	if err := checkIndexes(h.f.st); err != nil {
		t.Fatal(err)
	}
}

// The port cannot move once another rank runs with it, nor when every
// other port of the range is held: the allocation fails, saying why, and
// its gang is stopped.
func TestFSM_PortBusy_FailsWhenThePortCannotMove(t *testing.T) {
	h := newHarness(t)
	n1 := node("n1", 0)
	n1.MasterPorts = structs.PortRange{Min: 40000, Max: 40001}
	h.register(n1)
	h.register(node("n2", 0))
	h.submit("a", spec(2, 0))
	h.place("a", withPort(40000, alloc("a0", "n1", 0), alloc("a1", "n2", 1))...)
	h.mustUpdate("n2", "a1", structs.AllocRunning, 0, "")
	h.portBusy("n1", "a0", 40000)
	if a := h.alloc("a0"); a.State != structs.AllocFailed || a.Reason !=
		"start failed: MASTER_PORT 40000 is in use on node name-n1 by a program skein does not run, and rank 1 already started with it" {
		t.Fatalf("a0: %s %q", a.State, a.Reason)
	}
	if a := h.alloc("a1"); a.DesiredState != structs.DesiredStop {
		t.Fatalf("a1 is not asked to stop: %+v", a)
	}

	h.submit("b", spec(2, 0))
	h.submit("c", spec(2, 0))
	h.place("b", withPort(40000, alloc("b0", "n1", 0), alloc("b1", "n2", 1))...)
	h.place("c", withPort(40001, alloc("c0", "n1", 0), alloc("c1", "n2", 1))...)
	h.portBusy("n1", "c0", 40001)
	if a := h.alloc("c0"); a.State != structs.AllocFailed || !strings.HasSuffix(a.Reason, "and every other port of its range 40000-40001 is held by a job") {
		t.Fatalf("c0: %s %q", a.State, a.Reason)
	}
	if err := checkIndexes(h.f.st); err != nil {
		t.Fatal(err)
	}
}
