package fsm

import (
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_NodeLiveAllocsFollowsHoldAndRelease(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 1))
	h.submit("a", spec(2, 1))
	h.submit("b", spec(1, 1))
	h.submit("c", spec(1, 0))
	h.place("a", alloc("a0", "n1", 0, gpuID("n1", 0)), alloc("a1", "n2", 1, gpuID("n2", 0)))
	h.place("c", alloc("c0", "n1", 0))
	h.place("b", alloc("b0", "n1", 0, gpuID("n1", 1)))
	h.mustUpdate("n1", "c0", structs.AllocSucceeded, 0, "")

	if got := allocIDs(h.f.NodeLiveAllocs("n1")); !slices.Equal(got, []string{"a0", "b0"}) {
		t.Fatalf("live on n1 = %v, want [a0 b0] by creation", got)
	}
	// A lost node's allocations leave its live set; the rank on n1 is
	// asked to stop but stays live until it reports.
	h.applyErr(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: "n2", Status: structs.NodeDown, At: h.at()})
	if err := h.applyErr(structs.NodeAllocsLostType, structs.NodeAllocsLostRequest{NodeID: "n2", Reason: "gone", At: h.at()}); err != nil {
		t.Fatal(err)
	}
	if got := h.f.NodeLiveAllocs("n2"); len(got) != 0 {
		t.Fatalf("lost node still has live allocs %v", allocIDs(got))
	}
	if got := allocIDs(h.f.NodeLiveAllocs("n1")); !slices.Equal(got, []string{"a0", "b0"}) {
		t.Fatalf("live on n1 = %v after n2 was lost", got)
	}
	// Copies: changing one changes nothing in the state.
	h.f.NodeLiveAllocs("n1")[0].State = structs.AllocFailed
	if h.alloc("a0").State != structs.AllocPending {
		t.Fatal("NodeLiveAllocs returned the state's own allocation")
	}
	g := restoreFresh(t, h.f)
	if got := allocIDs(g.NodeLiveAllocs("n1")); !slices.Equal(got, []string{"a0", "b0"}) {
		t.Fatalf("restored live on n1 = %v", got)
	}
	if err := checkIndexes(g.st); err != nil {
		t.Fatal(err)
	}
}
