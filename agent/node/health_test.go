package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// trackerNode is a committed node with n healthy GPUs.
func trackerNode(n int) (*structs.Node, []structs.GPU) {
	inv := make([]structs.GPU, n)
	for i := range inv {
		inv[i] = structs.GPU{Index: i, UUID: fmt.Sprintf("GPU-%d", i), Healthy: true, Simulated: true}
	}
	return &structs.Node{ID: "n1", GPUs: append([]structs.GPU(nil), inv...)}, inv
}

// commit applies reports to a committed node the way the FSM would (the
// parts the tracker reads back).
func commit(n *structs.Node, hs []structs.GPUHealth) {
	for _, h := range hs {
		for i := range n.GPUs {
			g := &n.GPUs[i]
			if g.UUID == h.UUID {
				g.Healthy, g.Reason, g.UnhealthySince, g.LastFaultAt = h.Healthy, h.Reason, h.UnhealthySince, h.LastFaultAt
				g.Warning, g.ForeignProcesses, g.ForeignAllowed = h.Warning, h.ForeignProcesses, h.ForeignAllowed
			}
		}
	}
}

func TestHealthTracker_FaultLastsTheCleanPeriodFromTheLastFatalEvent(t *testing.T) {
	n, inv := trackerNode(2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newHealthTracker(inv, time.Minute, false, t0)
	if ch := tr.changes(n, nil, t0); len(ch) != 0 {
		t.Fatalf("healthy GPUs reported: %+v", ch)
	}
	tr.observe(gpu.Event{Index: 1, Kind: gpu.Fatal, Reason: "XID 79", At: t0}, t0)
	ch := tr.changes(n, nil, t0)
	if len(ch) != 1 || ch[0].UUID != "GPU-1" || ch[0].Healthy || ch[0].Reason != "XID 79" || !ch[0].LastFaultAt.Equal(t0) {
		t.Fatalf("report after a fault: %+v", ch)
	}
	if tr.mask.Load() != 1<<1 {
		t.Fatalf("gossip mask %b, want GPU 1", tr.mask.Load())
	}
	commit(n, ch)
	// The condition persists and is re-reported: no new write until the
	// fault time moved by a quarter of the clean period.
	tr.observe(gpu.Event{Index: 1, Kind: gpu.Fatal, Reason: "XID 79", At: t0.Add(5 * time.Second)}, t0)
	if ch := tr.changes(n, nil, t0.Add(5*time.Second)); len(ch) != 0 {
		t.Fatalf("a re-reported fault wrote again at once: %+v", ch)
	}
	later := t0.Add(20 * time.Second)
	tr.observe(gpu.Event{Index: 1, Kind: gpu.Fatal, Reason: "XID 79", At: later}, later)
	ch = tr.changes(n, nil, later)
	if len(ch) != 1 || !ch[0].LastFaultAt.Equal(later) || !ch[0].UnhealthySince.Equal(t0) {
		t.Fatalf("report after a long-lasting fault: %+v", ch)
	}
	commit(n, ch)
	// Clean for less than the period from the last fatal event: still out.
	if ch := tr.changes(n, nil, later.Add(59*time.Second)); len(ch) != 0 {
		t.Fatalf("GPU back before its clean period: %+v", ch)
	}
	ch = tr.changes(n, nil, later.Add(time.Minute))
	if len(ch) != 1 || !ch[0].Healthy || tr.mask.Load() != 0 {
		t.Fatalf("report after the clean period: %+v, mask %b", ch, tr.mask.Load())
	}
}

func TestHealthTracker_UncordonEndsTheQuarantine(t *testing.T) {
	n, inv := trackerNode(1)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newHealthTracker(inv, time.Hour, false, t0)
	tr.observe(gpu.Event{Index: 0, Kind: gpu.Fatal, Reason: "XID 79", At: t0}, t0)
	commit(n, tr.changes(n, nil, t0))
	// A person uncordons the GPU.
	n.GPUs[0].Healthy, n.GPUs[0].Reason, n.GPUs[0].ClearedAt = true, "", t0.Add(time.Second)
	if ch := tr.changes(n, nil, t0.Add(2*time.Second)); len(ch) != 0 {
		t.Fatalf("the node re-reported a fault a person cleared: %+v", ch)
	}
	tr.observe(gpu.Event{Index: 0, Kind: gpu.Fatal, Reason: "XID 79", At: t0.Add(3 * time.Second)}, t0)
	if ch := tr.changes(n, nil, t0.Add(3*time.Second)); len(ch) != 1 || ch[0].Healthy {
		t.Fatalf("a new fault after the uncordon: %+v", ch)
	}
}

func TestHealthTracker_ProcessesOnGPUsNoAllocationHoldsAreForeign(t *testing.T) {
	n, inv := trackerNode(2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newHealthTracker(inv, time.Minute, false, t0)
	tr.observe(gpu.Event{Index: 0, Kind: gpu.Processes, PIDs: []uint32{10, 11}}, t0)
	tr.observe(gpu.Event{Index: 1, Kind: gpu.Processes, PIDs: []uint32{12}}, t0)
	ch := tr.changes(n, map[string]bool{"GPU-1": true}, t0)
	if len(ch) != 1 || ch[0].UUID != "GPU-0" || ch[0].ForeignProcesses != 2 || ch[0].ForeignAllowed || !ch[0].Healthy {
		t.Fatalf("report with processes: %+v", ch)
	}
	commit(n, ch)
	tr.observe(gpu.Event{Index: 0, Kind: gpu.Processes}, t0)
	if ch := tr.changes(n, map[string]bool{"GPU-1": true}, t0); len(ch) != 1 || ch[0].ForeignProcesses != 0 || ch[0].UUID != "GPU-0" {
		t.Fatalf("report after the processes left: %+v", ch)
	}
	allowed := newHealthTracker(inv, time.Minute, true, t0)
	allowed.observe(gpu.Event{Index: 0, Kind: gpu.Processes, PIDs: []uint32{10}}, t0)
	n2, _ := trackerNode(2)
	if ch := allowed.changes(n2, nil, t0); len(ch) != 1 || !ch[0].ForeignAllowed {
		t.Fatalf("report with --allow-foreign-gpu-use: %+v", ch)
	}
	if tr.observe(gpu.Event{Index: 7, Kind: gpu.Fatal}, t0) {
		t.Fatal("an event for a GPU the node lacks was taken")
	}
}

func TestHealthTracker_SeedKeepsAQuarantineOverARestart(t *testing.T) {
	n, inv := trackerNode(1)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n.GPUs[0].Healthy, n.GPUs[0].Reason, n.GPUs[0].UnhealthySince, n.GPUs[0].LastFaultAt = false, "XID 79", t0, t0
	tr := newHealthTracker(inv, time.Minute, false, t0.Add(10*time.Second))
	tr.seed(n)
	if ch := tr.changes(n, nil, t0.Add(30*time.Second)); len(ch) != 0 {
		t.Fatalf("a restarted agent changed a running quarantine: %+v", ch)
	}
	if ch := tr.changes(n, nil, t0.Add(time.Minute)); len(ch) != 1 || !ch[0].Healthy {
		t.Fatalf("the quarantine did not end after its clean period: %+v", ch)
	}
}
