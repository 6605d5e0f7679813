package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// t0 is the time every test request is stamped from.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// tb is what the helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// harness applies entries to one FSM at increasing indexes.
type harness struct {
	t   tb
	f   *FSM
	idx uint64
}

func newHarness(t tb) *harness {
	return &harness{t: t, f: New(nil)}
}

// at returns t0 plus the current index in seconds, so times differ per entry.
func (h *harness) at() time.Time { return t0.Add(time.Duration(h.idx) * time.Second) }

// apply encodes msg and applies it as the next log entry.
func (h *harness) apply(mt structs.MessageType, msg any) any {
	h.t.Helper()
	buf, err := structs.Encode(mt, msg)
	if err != nil {
		h.t.Fatalf("encode: %v", err)
	}
	h.idx++
	return h.f.Apply(&raft.Log{Index: h.idx, Data: buf})
}

// applyErr applies msg and returns the result as an error (nil if it is not one).
func (h *harness) applyErr(mt structs.MessageType, msg any) error {
	h.t.Helper()
	err, _ := h.apply(mt, msg).(error)
	return err
}

// gpus returns n healthy GPUs named after the node.
func gpus(nodeID string, n int) []structs.GPU {
	out := make([]structs.GPU, n)
	for i := range out {
		out[i] = structs.GPU{Index: i, UUID: gpuID(nodeID, i), Model: "H100", MemoryMiB: 81559, Healthy: true}
	}
	return out
}

func gpuID(nodeID string, i int) string { return fmt.Sprintf("GPU-%s-%d", nodeID, i) }

func node(id string, nGPUs int) structs.Node {
	return structs.Node{ID: id, Name: "name-" + id, CPUs: 32, MemoryMiB: 256 << 10, GPUs: gpus(id, nGPUs), Status: structs.NodeReady}
}

func (h *harness) register(n structs.Node) {
	h.t.Helper()
	if err := h.applyErr(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: n, At: h.at()}); err != nil {
		h.t.Fatalf("register %s: %v", n.ID, err)
	}
}

func spec(nodes, gpus int) structs.JobSpec {
	return structs.JobSpec{Command: []string{"python", "train.py"}, Nodes: nodes, GPUs: gpus}
}

// submit creates a job and fails the test if Apply refuses it.
func (h *harness) submit(id string, s structs.JobSpec) *structs.Job {
	h.t.Helper()
	resp := h.apply(structs.JobSubmitType, structs.JobSubmitRequest{JobID: id, Spec: s, SubmittedAt: h.at()})
	j, ok := resp.(*structs.Job)
	if !ok {
		h.t.Fatalf("submit %s: got %v", id, resp)
	}
	return j
}

// alloc is a plan allocation for rank r of a job on a node with some GPUs.
func alloc(id, nodeID string, rank int, gpuIDs ...string) structs.Allocation {
	return structs.Allocation{ID: id, NodeID: nodeID, Rank: rank, GPUs: gpuIDs}
}

// plan applies a plan and returns its result.
func (h *harness) plan(p structs.Plan) *structs.PlanResult {
	h.t.Helper()
	resp := h.apply(structs.PlanApplyType, structs.PlanApplyRequest{Plan: p, At: h.at()})
	res, ok := resp.(*structs.PlanResult)
	if !ok {
		h.t.Fatalf("plan: got %v", resp)
	}
	return res
}

// place applies a one-placement plan and fails the test if it is rejected.
func (h *harness) place(jobID string, allocs ...structs.Allocation) {
	h.t.Helper()
	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{{JobID: jobID, Allocations: allocs}}})
	if len(res.Rejected) != 0 {
		h.t.Fatalf("place %s: rejected: %v", jobID, res.Rejected)
	}
}

// update reports one allocation's state from a node.
func (h *harness) update(nodeID, allocID string, st structs.AllocState, code int, reason string) error {
	h.t.Helper()
	return h.applyErr(structs.AllocUpdateType, structs.AllocUpdateRequest{
		NodeID:  nodeID,
		Updates: []structs.AllocUpdate{{AllocID: allocID, State: st, ExitCode: code, Reason: reason, At: h.at()}},
	})
}

// mustUpdate is update that fails the test on a skipped update.
func (h *harness) mustUpdate(nodeID, allocID string, st structs.AllocState, code int, reason string) {
	h.t.Helper()
	if err := h.update(nodeID, allocID, st, code, reason); err != nil {
		h.t.Fatalf("update %s: %v", allocID, err)
	}
}

func (h *harness) job(id string) *structs.Job {
	h.t.Helper()
	j, ok := h.f.Job(id)
	if !ok {
		h.t.Fatalf("job %s not found", id)
	}
	return j
}

func (h *harness) alloc(id string) *structs.Allocation {
	h.t.Helper()
	a, ok := h.f.Alloc(id)
	if !ok {
		h.t.Fatalf("alloc %s not found", id)
	}
	return a
}

// snapshotBytes persists a snapshot of f and returns what was written.
func snapshotBytes(t tb, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("persist: %v", err)
	}
	if !sink.closed {
		t.Fatalf("persist did not close the sink")
	}
	return sink.Bytes()
}

// restoreFresh restores a snapshot of f into a new FSM.
func restoreFresh(t tb, f *FSM) *FSM {
	t.Helper()
	g := New(nil)
	if err := g.Restore(readCloser(snapshotBytes(t, f))); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return g
}

func readCloser(b []byte) *nopCloser { return &nopCloser{bytes.NewReader(b)} }

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed    bool
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// wantErrIs fails unless err wraps target and its text contains every part.
func wantErrIs(t tb, err, target error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %v", target)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("error %q does not wrap %q", err, target)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
}
