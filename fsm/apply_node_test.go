package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func (h *harness) nodeStatus(id string, st structs.NodeStatus) error {
	h.t.Helper()
	return h.applyErr(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: id, Status: st, Reason: "test", At: h.at()})
}

func (h *harness) allocsLost(id string) error {
	h.t.Helper()
	return h.applyErr(structs.NodeAllocsLostType, structs.NodeAllocsLostRequest{NodeID: id, Reason: "lost: node down", At: h.at()})
}

func TestFSM_NodeStatusChangesStatusOnly(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j1", spec(1, 1))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	if err := h.nodeStatus("n1", structs.NodeDown); err != nil {
		t.Fatal(err)
	}
	n, _ := h.f.Node("n1")
	if n.Status != structs.NodeDown || n.StatusReason != "test" || n.StatusAt.IsZero() {
		t.Fatalf("node after status down: %+v", n)
	}
	if a := h.alloc("a1"); !a.Live() {
		t.Fatalf("marking a node down ended its allocation: %s", a.State)
	}
}

func TestFSM_NodeStatusRejectsUnknownNodeAndStatus(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 0))
	before := h.f.Hash()
	if err := h.nodeStatus("nope", structs.NodeDown); !errors.Is(err, ErrNodeNotFound) {
		t.Errorf("unknown node: %v", err)
	}
	if err := h.nodeStatus("n1", "sleepy"); !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("unknown status: %v", err)
	}
	if h.f.Hash() != before {
		t.Error("a refused status change changed state")
	}
}

func TestFSM_NodeAllocsLostRequeuesJobsOnce(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	s := spec(1, 1)
	s.Restarts = 1
	h.submit("j1", s)
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a1", structs.AllocRunning, 0, "")

	if err := h.allocsLost("n1"); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("allocations of a ready node declared lost: %v", err)
	}
	if err := h.nodeStatus("n1", structs.NodeDown); err != nil {
		t.Fatal(err)
	}
	if err := h.allocsLost("n1"); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("a1"); a.State != structs.AllocLost || a.Reason != "lost: node down" {
		t.Fatalf("allocation after node lost: %s %q", a.State, a.Reason)
	}
	j := h.job("j1")
	if j.State != structs.JobQueued || j.Attempts != 1 {
		t.Fatalf("job after its node was lost: %s attempts %d, want queued after 1", j.State, j.Attempts)
	}
	// The GPU is free again and a repeat (a new leader deciding again) changes nothing.
	before := h.f.Hash()
	if err := h.allocsLost("n1"); err != nil {
		t.Fatal(err)
	}
	if h.f.Hash() != before {
		t.Fatal("repeating NodeAllocsLost changed state")
	}
	h.place("j1", alloc("a2", "n2", 0, gpuID("n2", 0)))
	// The node comes back and reports the old allocation: it stays lost.
	if err := h.nodeStatus("n1", structs.NodeReady); err != nil {
		t.Fatal(err)
	}
	h.mustUpdate("n1", "a1", structs.AllocKilled, 137, "killed: lost contact")
	if a := h.alloc("a1"); a.State != structs.AllocLost {
		t.Fatalf("a returning node's report moved a lost allocation to %s", a.State)
	}
	if j := h.job("j1"); j.State != structs.JobRunning || j.Attempts != 2 {
		t.Fatalf("replacement disturbed: %s attempts %d", j.State, j.Attempts)
	}
}

func TestFSM_NodeAllocsLostWithoutRestartsFailsTheJob(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j1", spec(1, 1))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	if err := h.nodeStatus("n1", structs.NodeDown); err != nil {
		t.Fatal(err)
	}
	if err := h.allocsLost("n1"); err != nil {
		t.Fatal(err)
	}
	if j := h.job("j1"); j.State != structs.JobFailed || j.Reason != "lost: node down" {
		t.Fatalf("job: %s %q, want failed with the loss as reason", j.State, j.Reason)
	}
}

func TestFSM_NodeRegisterKeepsTheContainerEngineAndBoundsIt(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 0)
	n.Containers = &structs.ContainerEngine{Engine: "docker 20.10.21", APIVersion: "1.41", GPUs: true,
		Images: []string{"busybox:latest"}, AllowMounts: []string{"/data"}}
	h.register(n)
	got, _ := h.f.Node("n1")
	if !got.Containers.Equal(n.Containers) {
		t.Fatalf("registered container engine = %+v, want %+v", got.Containers, n.Containers)
	}
	before := h.f.Hash()
	many := make([]string, structs.MaxEngineImages+1)
	for i := range many {
		many[i] = fmt.Sprintf("img:%d", i)
	}
	for name, e := range map[string]structs.ContainerEngine{
		"a long engine error":    {Error: strings.Repeat("x", structs.MaxEngineErrorLen+1)},
		"too many images":        {Engine: "docker", Images: many},
		"a long image reference": {Engine: "docker", Images: []string{strings.Repeat("i", structs.MaxImageRefLen+1)}},
		"too many allowed mounts": {Engine: "docker",
			AllowMounts: slices.Repeat([]string{"/data"}, structs.MaxMounts+1)},
		"a relative allowed mount": {Engine: "docker", AllowMounts: []string{"data"}},
	} {
		bad := node("n1", 0)
		bad.Containers = &e
		if err := h.applyErr(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: bad, At: h.at()}); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("register with %s = %v, want ErrInvalidRequest", name, err)
		}
	}
	if h.f.Hash() != before {
		t.Error("a refused registration changed state")
	}
}
