package fsm

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// health reports one GPU's health from its node.
func (h *harness) health(nodeID string, gh ...structs.GPUHealth) error {
	h.t.Helper()
	return h.applyErr(structs.NodeGPUHealthType, structs.NodeGPUHealthRequest{NodeID: nodeID, GPUs: gh, At: h.at()})
}

// fault is an unhealthy report for GPU i of a node, seen now.
func (h *harness) fault(nodeID string, i int, reason string) structs.GPUHealth {
	return structs.GPUHealth{UUID: gpuID(nodeID, i), Reason: reason, LastFaultAt: h.at(), UnhealthySince: h.at()}
}

func (h *harness) cordon(nodeID string, i int, cordon bool, reason string) error {
	h.t.Helper()
	return h.applyErr(structs.GPUCordonType, structs.GPUCordonRequest{NodeID: nodeID, UUID: gpuID(nodeID, i), Cordon: cordon, Reason: reason, At: h.at()})
}

func (h *harness) gpu(nodeID string, i int) structs.GPU {
	h.t.Helper()
	n, ok := h.f.Node(nodeID)
	if !ok {
		h.t.Fatalf("node %s not found", nodeID)
	}
	return n.GPUs[i]
}

// placeRejected applies a one-placement plan and returns the rejection
// reason, failing the test if the placement was accepted.
func (h *harness) placeRejected(jobID string, allocs ...structs.Allocation) string {
	h.t.Helper()
	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{{JobID: jobID, Allocations: allocs}}})
	if len(res.Rejected) != 1 {
		h.t.Fatalf("place %s on %v: accepted, want rejected", jobID, allocs)
	}
	return res.Rejected[0].Reason
}

func TestFSM_GPUFaultStopsItsAllocationAndRestartsWithoutUsingARestart(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j1", spec(1, 1)) // no restarts
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a1", structs.AllocRunning, 0, "")

	if err := h.health("n1", h.fault("n1", 0, "XID 79: GPU has fallen off the bus")); err != nil {
		t.Fatal(err)
	}
	g := h.gpu("n1", 0)
	if g.Healthy || g.Reason != "XID 79: GPU has fallen off the bus" || g.UnhealthySince.IsZero() || g.HealthState() != structs.GPUUnhealthy {
		t.Fatalf("GPU after a fault: %+v", g)
	}
	a := h.alloc("a1")
	want := "GPU 0 on node name-n1 unhealthy: XID 79: GPU has fallen off the bus"
	if a.DesiredState != structs.DesiredStop || a.GPUFault != want || !a.Live() {
		t.Fatalf("allocation on the failed GPU: desired %s, fault %q, state %s", a.DesiredState, a.GPUFault, a.State)
	}
	// The node stops the process and reports it.
	h.mustUpdate("n1", "a1", structs.AllocKilled, 143, "killed: "+want)
	j := h.job("j1")
	if j.State != structs.JobQueued || j.GPUFaults != 1 || !j.NotBefore.IsZero() {
		t.Fatalf("job after a GPU fault: %s, gpu_faults %d, not_before %v; want queued at once", j.State, j.GPUFaults, j.NotBefore)
	}
	if !strings.Contains(j.Reason, "attempt 1 stopped: "+want) {
		t.Fatalf("job reason %q does not say what stopped the attempt", j.Reason)
	}
	// Not on the failed GPU again; another one is fine.
	if r := h.placeRejected("j1", alloc("a2", "n1", 0, gpuID("n1", 0))); !strings.Contains(r, "unhealthy: XID 79") {
		t.Fatalf("placement on the failed GPU rejected for %q", r)
	}
	h.place("j1", alloc("a3", "n1", 0, gpuID("n1", 1)))
	h.mustUpdate("n1", "a3", structs.AllocSucceeded, 0, "")
	if j := h.job("j1"); j.State != structs.JobSucceeded || j.Attempts != 2 {
		t.Fatalf("job after its second attempt: %s after %d attempts", j.State, j.Attempts)
	}
}

func TestFSM_GPUFaultWhileTheProcessCrashesStillUsesNoRestartOrBackoff(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j1", spec(1, 1))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	if err := h.health("n1", h.fault("n1", 0, "XID 48: double-bit ECC error")); err != nil {
		t.Fatal(err)
	}
	// CUDA noticed first: the process failed on its own.
	h.mustUpdate("n1", "a1", structs.AllocFailed, 1, "")
	if j := h.job("j1"); j.State != structs.JobQueued || !j.NotBefore.IsZero() || !strings.Contains(j.Reason, "XID 48") {
		t.Fatalf("job: %s not_before %v reason %q", j.State, j.NotBefore, j.Reason)
	}
}

func TestFSM_GPUFaultRestartsAreCapped(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", structs.MaxFreeGPUFaultRestarts+1))
	h.submit("j1", spec(1, 1))
	for i := 0; i <= structs.MaxFreeGPUFaultRestarts; i++ {
		id := "a" + string(rune('0'+i))
		h.place("j1", alloc(id, "n1", 0, gpuID("n1", i)))
		if err := h.health("n1", h.fault("n1", i, "XID 79")); err != nil {
			t.Fatal(err)
		}
		h.mustUpdate("n1", id, structs.AllocKilled, 143, "killed")
	}
	j := h.job("j1")
	if j.State != structs.JobFailed || j.GPUFaults != structs.MaxFreeGPUFaultRestarts {
		t.Fatalf("job after %d GPU faults and no restarts: %s, gpu_faults %d", structs.MaxFreeGPUFaultRestarts+1, j.State, j.GPUFaults)
	}
	if !strings.Contains(j.Reason, "XID 79") {
		t.Fatalf("failed job's reason %q does not name the fault", j.Reason)
	}
}

func TestFSM_GPUFaultOnOneRankStopsTheGang(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.register(node("n2", 1))
	h.submit("j1", spec(2, 1))
	h.place("j1", alloc("r0", "n1", 0, gpuID("n1", 0)), alloc("r1", "n2", 1, gpuID("n2", 0)))
	if err := h.health("n2", h.fault("n2", 0, "XID 79")); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("r0"); a.DesiredState != structs.DesiredRun {
		t.Fatal("the healthy rank was stopped before the failed one ended")
	}
	h.mustUpdate("n2", "r1", structs.AllocKilled, 143, "killed")
	if a := h.alloc("r0"); a.DesiredState != structs.DesiredStop {
		t.Fatal("the rest of the gang keeps running after a rank's GPU failed")
	}
	h.mustUpdate("n1", "r0", structs.AllocKilled, 143, "killed: gang stopped")
	if j := h.job("j1"); j.State != structs.JobQueued || !strings.Contains(j.Reason, "rank 1 GPU 0 on node name-n2 unhealthy") {
		t.Fatalf("gang job after a GPU fault: %s %q", j.State, j.Reason)
	}
}

func TestFSM_CordonKeepsRunningWorkAndBlocksNewPlacements(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j1", spec(1, 1))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	if err := h.cordon("n1", 0, true, "fan noise"); err != nil {
		t.Fatal(err)
	}
	if err := h.cordon("n1", 1, true, ""); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("a1"); a.DesiredState != structs.DesiredRun {
		t.Fatal("a cordon stopped the work on the GPU")
	}
	g := h.gpu("n1", 1)
	if !g.Cordoned || g.CordonReason != reasonCordoned || g.CordonedAt.IsZero() || g.HealthState() != structs.GPUCordoned || !g.Healthy {
		t.Fatalf("cordoned GPU: %+v", g)
	}
	h.submit("j2", spec(1, 1))
	if r := h.placeRejected("j2", alloc("b1", "n1", 0, gpuID("n1", 1))); !strings.Contains(r, "cordoned by hand") {
		t.Fatalf("placement on a cordoned GPU rejected for %q", r)
	}
	// Cordoning again changes nothing; uncordoning returns the GPU.
	before := h.f.Hash()
	if err := h.cordon("n1", 1, true, ""); err != nil || h.f.Hash() != before {
		t.Fatalf("repeated cordon: %v, state changed %v", err, h.f.Hash() != before)
	}
	if err := h.cordon("n1", 1, false, ""); err != nil {
		t.Fatal(err)
	}
	h.place("j2", alloc("b2", "n1", 0, gpuID("n1", 1)))
}

func TestFSM_UncordonEndsAQuarantineAndStaleFaultsStayIgnored(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	stale := h.fault("n1", 0, "XID 79")
	if err := h.health("n1", stale); err != nil {
		t.Fatal(err)
	}
	if err := h.cordon("n1", 0, false, ""); err != nil {
		t.Fatal(err)
	}
	g := h.gpu("n1", 0)
	if !g.Healthy || g.Reason != "" || g.ClearedAt.IsZero() {
		t.Fatalf("GPU after uncordon: %+v", g)
	}
	// A report the node sent before the uncordon changes nothing...
	if err := h.health("n1", stale); err != nil {
		t.Fatal(err)
	}
	if g := h.gpu("n1", 0); !g.Healthy {
		t.Fatal("a fault seen before the uncordon took the GPU out again")
	}
	// ...a new fault does.
	if err := h.health("n1", h.fault("n1", 0, "XID 79 again")); err != nil {
		t.Fatal(err)
	}
	if g := h.gpu("n1", 0); g.Healthy || g.Reason != "XID 79 again" {
		t.Fatalf("GPU after a new fault: %+v", g)
	}
	// The node's clean period passed: it reports the GPU healthy.
	if err := h.health("n1", structs.GPUHealth{UUID: gpuID("n1", 0), Healthy: true}); err != nil {
		t.Fatal(err)
	}
	if g := h.gpu("n1", 0); !g.Healthy || !g.UnhealthySince.IsZero() || g.LastFaultAt.IsZero() {
		t.Fatalf("GPU after its clean period: %+v", g)
	}
}

func TestFSM_ForeignProcessesBlockPlacementUnlessAllowed(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("j1", spec(1, 1))
	if err := h.health("n1", structs.GPUHealth{UUID: gpuID("n1", 0), Healthy: true, ForeignProcesses: 2, Warning: "clocks throttled"}); err != nil {
		t.Fatal(err)
	}
	g := h.gpu("n1", 0)
	if g.HealthState() != structs.GPUForeign || g.Warning != "clocks throttled" {
		t.Fatalf("GPU with foreign processes: %+v", g)
	}
	if r := h.placeRejected("j1", alloc("a1", "n1", 0, gpuID("n1", 0))); !strings.Contains(r, "in use by 2 processes skein did not start") {
		t.Fatalf("placement next to foreign processes rejected for %q", r)
	}
	if err := h.health("n1", structs.GPUHealth{UUID: gpuID("n1", 0), Healthy: true, ForeignProcesses: 2, ForeignAllowed: true}); err != nil {
		t.Fatal(err)
	}
	h.place("j1", alloc("a2", "n1", 0, gpuID("n1", 0)))
	if a := h.alloc("a2"); a.DesiredState != structs.DesiredRun {
		t.Fatal("foreign processes stopped skein's allocation")
	}
}

func TestFSM_GPUHealthAndCordonRejectBadRequests(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	before := h.f.Hash()
	long := strings.Repeat("x", structs.MaxHealthReasonLen+1)
	ok := structs.GPUHealth{UUID: gpuID("n1", 0), Healthy: true}
	for _, tc := range []struct {
		name   string
		node   string
		gpus   []structs.GPUHealth
		target error
		want   string
	}{
		{"unknown node", "nope", []structs.GPUHealth{ok}, ErrNodeNotFound, "nope"},
		{"unknown GPU", "n1", []structs.GPUHealth{ok, {UUID: "GPU-x", Healthy: true}}, ErrInvalidRequest, `gpus[1]: uuid "GPU-x"`},
		{"GPU twice", "n1", []structs.GPUHealth{ok, ok}, ErrInvalidRequest, "listed twice"},
		{"long reason", "n1", []structs.GPUHealth{{UUID: gpuID("n1", 0), Reason: long, LastFaultAt: t0}}, ErrInvalidRequest, "longer than 512"},
		{"negative foreign", "n1", []structs.GPUHealth{{UUID: gpuID("n1", 0), Healthy: true, ForeignProcesses: -1}}, ErrInvalidRequest, "foreign_processes -1"},
		{"fault without time", "n1", []structs.GPUHealth{{UUID: gpuID("n1", 1), Reason: "XID 79"}}, ErrInvalidRequest, "last_fault_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErrIs(t, h.health(tc.node, tc.gpus...), tc.target, tc.want)
		})
	}
	wantErrIs(t, h.applyErr(structs.GPUCordonType, structs.GPUCordonRequest{NodeID: "n1", UUID: "GPU-x", Cordon: true}), ErrInvalidRequest, "GPU-x")
	wantErrIs(t, h.applyErr(structs.GPUCordonType, structs.GPUCordonRequest{NodeID: "nope", UUID: gpuID("n1", 0), Cordon: true}), ErrNodeNotFound)
	wantErrIs(t, h.cordon("n1", 0, true, long), ErrInvalidRequest, "reason longer")
	if h.f.Hash() != before {
		t.Fatal("a refused health or cordon request changed state")
	}
}

func TestFSM_ReRegisterKeepsCordonAndQuarantine(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 3)
	h.register(n)
	if err := h.cordon("n1", 0, true, "bad fan"); err != nil {
		t.Fatal(err)
	}
	if err := h.health("n1", h.fault("n1", 1, "XID 79")); err != nil {
		t.Fatal(err)
	}
	want := []structs.GPU{h.gpu("n1", 0), h.gpu("n1", 1)}
	// The agent restarts: discovery sees every GPU healthy again, and a
	// new GPU appears.
	n.GPUs = append(gpus("n1", 3), structs.GPU{Index: 3, UUID: "GPU-new", Model: "H100", Healthy: true})
	h.register(n)
	for i, w := range want {
		if g := h.gpu("n1", i); !reflect.DeepEqual(g, w) {
			t.Fatalf("GPU %d after re-registration:\n got %+v\nwant %+v", i, g, w)
		}
	}
	if g := h.gpu("n1", 3); !g.Healthy || g.UUID != "GPU-new" {
		t.Fatalf("new GPU after re-registration: %+v", g)
	}
}

func TestFSM_SnapshotRoundTripsGPUHealth(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.submit("j1", spec(1, 1))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0)))
	if err := h.health("n1", h.fault("n1", 0, "XID 79"),
		structs.GPUHealth{UUID: gpuID("n1", 1), Healthy: true, Warning: "throttled", ForeignProcesses: 1, ForeignAllowed: true}); err != nil {
		t.Fatal(err)
	}
	if err := h.cordon("n1", 2, true, "bad fan"); err != nil {
		t.Fatal(err)
	}
	if err := h.health("n1", h.fault("n1", 3, "XID 48")); err != nil {
		t.Fatal(err)
	}
	if err := h.cordon("n1", 3, false, ""); err != nil {
		t.Fatal(err)
	}
	h.mustUpdate("n1", "a1", structs.AllocKilled, 143, "killed")

	g := restoreFresh(t, h.f)
	if g.Hash() != h.f.Hash() {
		t.Fatal("restored state hashes differently")
	}
	n, _ := g.Node("n1")
	if want, _ := h.f.Node("n1"); !reflect.DeepEqual(n, want) {
		t.Fatalf("restored node differs:\n got %+v\nwant %+v", n, want)
	}
	zero := time.Time{}
	if n.GPUs[0].LastFaultAt == zero || n.GPUs[1].Warning == "" || !n.GPUs[1].ForeignAllowed ||
		n.GPUs[2].CordonReason != "bad fan" || n.GPUs[3].ClearedAt == zero {
		t.Fatalf("restored GPUs lost health fields: %+v", n.GPUs)
	}
	if j, _ := g.Job("j1"); j.GPUFaults != 1 {
		t.Fatalf("restored job lost its GPU fault count: %+v", j)
	}
	if a, _ := g.Alloc("a1"); !strings.Contains(a.GPUFault, "XID 79") {
		t.Fatalf("restored allocation lost its GPU fault: %+v", a)
	}
}

func TestFSM_GPUHealthIsDeterministic(t *testing.T) {
	run := func() string {
		h := newHarness(t)
		h.register(node("n1", 2))
		h.submit("j1", spec(1, 2))
		h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 0), gpuID("n1", 1)))
		if err := h.health("n1", h.fault("n1", 1, "XID 79"), h.fault("n1", 0, "XID 48")); err != nil {
			t.Fatal(err)
		}
		return h.f.Hash()
	}
	if a, b := run(), run(); a != b {
		t.Fatal("the same health entries gave different states")
	}
}

func TestFSM_ReRegisterWithAGPUDiscoveredUnhealthyStopsItsWork(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 2)
	h.register(n)
	h.submit("j1", spec(1, 1))
	h.place("j1", alloc("a1", "n1", 0, gpuID("n1", 1)))
	n.GPUs[1].Healthy, n.GPUs[1].Reason = false, "NVML: GPU is lost"
	h.register(n)
	if a := h.alloc("a1"); a.DesiredState != structs.DesiredStop || a.GPUFault != "GPU 1 on node name-n1 unhealthy: NVML: GPU is lost" {
		t.Fatalf("allocation on a GPU registered unhealthy: %s, fault %q", a.DesiredState, a.GPUFault)
	}
}
