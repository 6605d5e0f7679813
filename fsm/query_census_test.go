package fsm

import (
	"maps"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_CensusCountsTheStateAndHoldersByGPU(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	h.submit("a", spec(2, 1))
	h.submit("b", spec(1, 1))
	h.submit("c", spec(1, 0))
	hungry := spec(2, 2)
	hungry.Priority = 5
	h.submit("d", hungry)
	h.place("a", alloc("a0", "n1", 0, gpuID("n1", 0)), alloc("a1", "n2", 1, gpuID("n2", 0)))
	h.place("b", alloc("b0", "n1", 0, gpuID("n1", 1)))
	h.place("c", alloc("c0", "n2", 0))
	h.mustUpdate("n2", "c0", structs.AllocSucceeded, 0, "")
	h.mustUpdate("n1", "b0", structs.AllocRunning, 0, "")

	c := h.f.Census()
	wantJobs := map[structs.JobState]int{structs.JobQueued: 1, structs.JobRunning: 2, structs.JobSucceeded: 1}
	for _, st := range structs.JobStates {
		if c.Jobs[st] != wantJobs[st] {
			t.Errorf("jobs %s: %d, want %d", st, c.Jobs[st], wantJobs[st])
		}
	}
	wantAllocs := map[structs.AllocState]int{structs.AllocPending: 2, structs.AllocRunning: 1, structs.AllocSucceeded: 1}
	if !maps.Equal(c.Allocs, wantAllocs) {
		t.Errorf("allocations %v, want %v", c.Allocs, wantAllocs)
	}
	if c.Nodes[structs.NodeReady] != 2 || c.GPUs[structs.GPUHealthy] != 4 || c.GPUsHeld != 3 {
		t.Errorf("nodes %v, GPUs %v, held %d; want 2 ready, 4 healthy, 3 held", c.Nodes, c.GPUs, c.GPUsHeld)
	}
	if len(c.Queued) != 1 || c.Queued[0].GPUs != 4 || c.Queued[0].Priority != 5 {
		t.Errorf("queued %+v, want job d asking for 4 GPUs at priority 5", c.Queued)
	}
	if c.Index != h.f.Index() {
		t.Errorf("census index %d, state's %d", c.Index, h.f.Index())
	}
	if err := h.applyErr(structs.NodeDrainType, structs.NodeDrainRequest{NodeID: "n2", Drain: true, At: h.at()}); err != nil {
		t.Fatal(err)
	}
	if c := h.f.Census(); c.Nodes[structs.NodeReady] != 1 || c.Nodes[structs.NodeDraining] != 1 {
		t.Errorf("after a drain: nodes %v, want 1 ready, 1 draining", c.Nodes)
	}
	want := map[string]string{gpuID("n1", 0): "a", gpuID("n1", 1): "b"}
	if got := h.f.GPUHolders("n1"); !maps.Equal(got, want) {
		t.Errorf("holders on n1 %v, want %v", got, want)
	}
}
