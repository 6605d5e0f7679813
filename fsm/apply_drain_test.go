package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// drain applies a NodeDrain entry and returns Apply's answer as an error.
func (h *harness) drain(nodeID string, on, force bool, deadline time.Duration) error {
	h.t.Helper()
	req := structs.NodeDrainRequest{NodeID: nodeID, Drain: on, Force: force, At: h.at()}
	if deadline > 0 {
		req.Deadline = h.at().Add(deadline)
	}
	return h.applyErr(structs.NodeDrainType, req)
}

// drainStep applies a NodeDrainStep entry, at the harness's time unless
// req names one.
func (h *harness) drainStep(req structs.NodeDrainStepRequest) error {
	h.t.Helper()
	if req.At.IsZero() {
		req.At = h.at()
	}
	return h.applyErr(structs.NodeDrainStepType, req)
}

// kinds lists the kinds of events after index, in order.
func (h *harness) kinds(index uint64) []string {
	var out []string
	for _, e := range h.eventsFrom(index) {
		out = append(out, string(e.Kind))
	}
	return out
}

func TestFSM_NodeDrain_KeepsNewPlacementsOffUntilUndrained(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j", spec(1, 1))
	if err := h.drain("n1", true, false, 0); err != nil {
		t.Fatal(err)
	}
	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{{JobID: "j", Allocations: []structs.Allocation{alloc("a", "n1", 0, gpuID("n1", 0))}}}})
	if len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Reason, "draining") {
		t.Fatalf("a placement on a draining node: %+v, want it refused as draining", res.Rejected)
	}
	// Registering again (an agent restart) keeps the drain.
	h.register(node("n1", 2))
	if n, _ := h.f.Node("n1"); n.Drain == nil || n.StatusText() != "draining" {
		t.Fatalf("after registering again: drain %+v, shown %q", n.Drain, n.StatusText())
	}
	before := h.idx
	if err := h.drain("n1", false, false, 0); err != nil {
		t.Fatal(err)
	}
	if got := h.kinds(before); len(got) != 1 || got[0] != string(structs.EventNodeUndrained) {
		t.Fatalf("undrain events %v", got)
	}
	h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
	if err := h.drain("nx", true, false, 0); err == nil || !strings.Contains(err.Error(), "no such node") {
		t.Fatalf("drain of an unknown node: %v", err)
	}
	if err := h.applyErr(structs.NodeDrainType, structs.NodeDrainRequest{NodeID: "n1", Force: true, At: h.at()}); err == nil || !strings.Contains(err.Error(), "force") {
		t.Fatalf("an undrain with force: %v, want refused naming force", err)
	}
}

// drainedService runs web (1 replica, healthy) on n1, registers n2, and
// drains n1.
func drainedService(t *testing.T) *harness {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.register(node("n2", 4))
	h.registerService(service("web", 1, 1))
	h.runHealthy("svc-web-r0", "a0", 0)
	if err := h.drain("n1", true, false, 0); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestFSM_NodeDrainStep_AReplicaStopsOnlyOnceItsReplacementServes(t *testing.T) {
	h := drainedService(t)
	stop := structs.NodeDrainStepRequest{NodeID: "n1", Stop: []string{"svc-web-r0"}}
	wantErrIs(t, h.drainStep(stop), ErrDrainStale, "no replacement")
	if err := h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Replace: []string{"svc-web-r0"}}); err != nil {
		t.Fatal(err)
	}
	if r0 := h.job("svc-web-r0"); r0.ReplacedBy != "svc-web-r1" {
		t.Fatalf("replaced by %q, want svc-web-r1", r0.ReplacedBy)
	}
	wantErrIs(t, h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Replace: []string{"svc-web-r0"}}), ErrDrainStale, "already has replacement")
	wantErrIs(t, h.drainStep(stop), ErrDrainStale, "not available yet")
	// The replacement runs on n2 but is not healthy yet: r0 keeps serving.
	h.place("svc-web-r1", alloc("b0", "n2", 0, gpuID("n2", 0)))
	h.mustUpdate("n2", "b0", structs.AllocRunning, 0, "")
	if err := h.reportHealth("n2", "b0", false, "GET /health: 503"); err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, h.drainStep(stop), ErrDrainStale, "not available yet")
	if err := h.reportHealth("n2", "b0", true, "GET /health: 200"); err != nil {
		t.Fatal(err)
	}
	before := h.idx
	if err := h.drainStep(stop); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("a0"); a.DesiredState != structs.DesiredStop {
		t.Fatalf("r0's allocation is %s, want asked to stop", a.DesiredState)
	}
	evs := h.eventsFrom(before)
	if len(evs) == 0 || evs[0].Kind != structs.EventNodeDrainMoved || !strings.Contains(evs[0].Reason, "svc-web-r0") {
		t.Fatalf("events %+v, want node-drain-moved naming the replica", evs)
	}
	wantErrIs(t, h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Done: true}), ErrDrainStale, "still live")
	h.mustUpdate("n1", "a0", structs.AllocKilled, -1, "")
	if j := h.job("svc-web-r0"); j.State != structs.JobCancelled {
		t.Fatalf("the moved replica is %s, want cancelled (not restarted)", j.State)
	}
	if ids := replicaIDs(h.f, "web"); len(ids) != 2 || h.job("svc-web-r1").State != structs.JobRunning {
		t.Fatalf("replicas %v; r1 %s", ids, h.job("svc-web-r1").State)
	}
	before = h.idx
	if err := h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Done: true}); err != nil {
		t.Fatal(err)
	}
	n, _ := h.f.Node("n1")
	if !n.Drain.Drained() || n.StatusText() != "drained" {
		t.Fatalf("drain %+v shown %q, want drained", n.Drain, n.StatusText())
	}
	if got := h.kinds(before); len(got) != 1 || got[0] != string(structs.EventNodeDrained) {
		t.Fatalf("events %v, want node-drained", got)
	}
}

func TestFSM_NodeUndrain_StopsTheReplacementOfAReplicaStillThere(t *testing.T) {
	h := drainedService(t)
	if err := h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Replace: []string{"svc-web-r0"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.drain("n1", false, false, 0); err != nil {
		t.Fatal(err)
	}
	if r1 := h.job("svc-web-r1"); r1.State != structs.JobCancelled {
		t.Fatalf("the replacement is %s, want cancelled", r1.State)
	}
	if r0 := h.job("svc-web-r0"); r0.ReplacedBy != "" || r0.State != structs.JobRunning {
		t.Fatalf("r0: replaced by %q, %s", r0.ReplacedBy, r0.State)
	}
}

func TestFSM_NodeDrainStep_EvictsARestartableGangWithItsSignalAndNoRestartUsed(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	s := spec(2, 1)
	s.Restarts = 1
	s.TimeLimit = structs.Duration(time.Hour)
	s.Signal = &structs.TimeSignal{Name: "USR1", Before: structs.Duration(time.Minute)}
	h.submit("g", s)
	h.place("g", alloc("g0", "n1", 0, gpuID("n1", 0)), alloc("g1", "n2", 1, gpuID("n2", 0)))
	h.mustUpdate("n1", "g0", structs.AllocRunning, 0, "")
	h.mustUpdate("n2", "g1", structs.AllocRunning, 0, "")
	if err := h.drain("n1", true, false, 0); err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Kill: []string{"g"}}), ErrDrainStale, "deadline")
	if err := h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Evict: []string{"g"}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"g0", "g1"} {
		a := h.alloc(id)
		if a.DesiredState != structs.DesiredStop || a.StopSignal != "USR1" || a.StopGrace != 0 {
			t.Fatalf("%s: desired %s signal %q grace %s, want stop, USR1, the node's kill grace", id, a.DesiredState, a.StopSignal, a.StopGrace)
		}
	}
	wantErrIs(t, h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Evict: []string{"g"}}), ErrDrainStale, "")
	h.mustUpdate("n1", "g0", structs.AllocKilled, 143, "")
	h.mustUpdate("n2", "g1", structs.AllocKilled, 143, "")
	j := h.job("g")
	if j.State != structs.JobQueued || j.Evictions != 1 || j.Evicted != "" || j.RestartsUsed() != 0 || !j.NotBefore.IsZero() {
		t.Fatalf("after the eviction: %s, evictions %d, evicted %q, restarts used %d, not before %v",
			j.State, j.Evictions, j.Evicted, j.RestartsUsed(), j.NotBefore)
	}
	if !strings.Contains(j.Reason, "drains") {
		t.Fatalf("reason %q, want it to say the node drains", j.Reason)
	}
	// Snapshots of version 7 or later carry the drain and the eviction
	// (its jobs' numbers make it 9).
	if v := headerVersion(t, h.f); v < drainSnapshotVersion {
		t.Fatalf("snapshot version %d, want %d or later", v, drainSnapshotVersion)
	}
	got := restoreFresh(t, h.f)
	if got.Hash() != h.f.Hash() {
		t.Fatal("a restored snapshot differs from the state it was taken of")
	}
	if err := checkIndexes(got.st); err != nil {
		t.Fatal(err)
	}
	if d := got.DrainingNodes(); len(d) != 1 || d[0].ID != "n1" {
		t.Fatalf("restored draining nodes %v", d)
	}
	if err := h.drain("n1", false, false, 0); err != nil || len(h.f.DrainingNodes()) != 0 {
		t.Fatalf("undrain: %v, %d draining", err, len(h.f.DrainingNodes()))
	}
}

func TestFSM_NodeDrainStep_StopsOtherJobsOnlyPastTheDeadlineOrForced(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a", structs.AllocRunning, 0, "")
	if err := h.drain("n1", true, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	kill := structs.NodeDrainStepRequest{NodeID: "n1", Kill: []string{"j"}}
	wantErrIs(t, h.drainStep(kill), ErrDrainStale, "deadline has not passed")
	wantErrIs(t, h.drainStep(structs.NodeDrainStepRequest{NodeID: "n1", Evict: []string{"j"}}), ErrDrainStale, "cannot run again")
	// Past the deadline (the leader stamps At), the job is stopped.
	late := kill
	late.At = h.at().Add(2 * time.Hour)
	if err := h.drainStep(late); err != nil {
		t.Fatal(err)
	}
	if a := h.alloc("a"); a.DesiredState != structs.DesiredStop || !strings.Contains(a.Reason, "past its deadline") {
		t.Fatalf("alloc %s %q", a.DesiredState, a.Reason)
	}
	h.mustUpdate("n1", "a", structs.AllocKilled, -1, "")
	if j := h.job("j"); j.State != structs.JobFailed {
		t.Fatalf("job %s, want failed: it could not run again", j.State)
	}
}

func TestFSM_NodeDrainStep_RefusesBadSteps(t *testing.T) {
	h := drainedService(t)
	for name, c := range map[string]struct {
		req  structs.NodeDrainStepRequest
		want string
	}{
		"empty":          {structs.NodeDrainStepRequest{NodeID: "n1"}, "does nothing"},
		"done and moves": {structs.NodeDrainStepRequest{NodeID: "n1", Done: true, Stop: []string{"x"}}, "one or the other"},
		"unknown job":    {structs.NodeDrainStepRequest{NodeID: "n1", Replace: []string{"nope"}}, "no such job"},
		"not on it":      {structs.NodeDrainStepRequest{NodeID: "n2", Replace: []string{"svc-web-r0"}}, "not draining"},
		"twice":          {structs.NodeDrainStepRequest{NodeID: "n1", Replace: []string{"svc-web-r0", "svc-web-r0"}}, "named twice"},
		"replica evict":  {structs.NodeDrainStepRequest{NodeID: "n1", Evict: []string{"svc-web-r0"}}, "replaced, not evicted"},
	} {
		if err := h.drainStep(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestFSM_NodeRemove_ForgetsOnlyANodeDownWithNothingLive(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("j", spec(1, 1))
	h.place("j", alloc("a", "n1", 0, gpuID("n1", 0)))
	h.mustUpdate("n1", "a", structs.AllocRunning, 0, "")
	remove := func() error {
		return h.applyErr(structs.NodeRemoveType, structs.NodeRemoveRequest{NodeID: "n1", Reason: "gone", At: h.at()})
	}
	wantErrIs(t, remove(), ErrInvalidRequest, "only a node down or left")
	if err := h.applyErr(structs.NodeStatusType, structs.NodeStatusRequest{NodeID: "n1", Status: structs.NodeDown, At: h.at()}); err != nil {
		t.Fatal(err)
	}
	wantErrIs(t, remove(), ErrInvalidRequest, "not declared lost")
	if err := h.applyErr(structs.NodeAllocsLostType, structs.NodeAllocsLostRequest{NodeID: "n1", Reason: "lost", At: h.at()}); err != nil {
		t.Fatal(err)
	}
	before := h.idx
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.f.Node("n1"); ok {
		t.Fatal("the removed node is still in the state")
	}
	if got := h.kinds(before); len(got) != 1 || got[0] != string(structs.EventNodeRemoved) {
		t.Fatalf("events %v", got)
	}
	if a := h.alloc("a"); a.State != structs.AllocLost {
		t.Fatalf("the removed node's allocation is %s, want kept as lost", a.State)
	}
	if got := restoreFresh(t, h.f); got.Hash() != h.f.Hash() {
		t.Fatal("a state without the removed node does not restore as it was")
	}
	wantErrIs(t, remove(), ErrNodeNotFound, "")
}
