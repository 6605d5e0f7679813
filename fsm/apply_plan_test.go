package fsm

import (
	"cmp"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestFSM_Plan_PlacesGangAndStartsAttempt(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.register(node("n2", 2))
	s := spec(2, 2)
	s.CPUs, s.MemoryMiB = 4, 1024
	h.submit("job1", s)
	at := h.at()
	h.place("job1",
		alloc("a1", "n2", 1, gpuID("n2", 1), gpuID("n2", 0)),
		alloc("a0", "n1", 0, gpuID("n1", 0), gpuID("n1", 1)))

	j := h.job("job1")
	if j.State != structs.JobRunning || j.Attempts != 1 || !j.StartedAt.Equal(at) || j.ModifyIndex != h.idx {
		t.Fatalf("job after placement: %+v", j)
	}
	allocs := h.f.Allocs("job1")
	if len(allocs) != 2 || allocs[0].ID != "a0" || allocs[1].ID != "a1" {
		t.Fatalf("allocs not by rank: %v", allocs)
	}
	a := allocs[1]
	if a.JobID != "job1" || a.State != structs.AllocPending || a.DesiredState != structs.DesiredRun ||
		a.Attempt != 1 || a.CPUs != 4 || a.MemoryMiB != 1024 || a.CreateIndex != h.idx || !a.CreatedAt.Equal(at) ||
		strings.Join(a.GPUs, ",") != gpuID("n2", 1)+","+gpuID("n2", 0) {
		t.Fatalf("alloc a1: %+v", a)
	}
	if live := h.f.State().LiveAllocs; len(live) != 2 {
		t.Fatalf("live allocs: %d, want 2", len(live))
	}
}

func TestFSM_Plan_RejectsPlacementsStateNoLongerAllows(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(h *harness)
		jobID  string // job1 when empty
		allocs []structs.Allocation
		want   string
	}{
		{
			name:   "wrong allocation count",
			allocs: []structs.Allocation{alloc("x0", "n1", 0, gpuID("n1", 2))},
			want:   "plan has 1 allocations, job needs 2",
		},
		{
			name: "wrong GPU count",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n2", 0), gpuID("n2", 1)),
			},
			want: "has 2 GPUs, job needs 1",
		},
		{
			name: "GPU held by a live allocation",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 0)),
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "GPU GPU-n1-0 on node name-n1 is held by allocation held0 of job held",
		},
		{
			name: "unhealthy GPU",
			setup: func(h *harness) {
				n := node("n2", 3)
				n.GPUs[0].Healthy, n.GPUs[0].Reason = false, "XID 79"
				h.register(n)
			},
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "GPU GPU-n2-0 on node name-n2 is unhealthy: XID 79",
		},
		{
			name: "GPU of another node",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n1", 1)),
			},
			want: "GPU GPU-n1-1 is not on node name-n2",
		},
		{
			name: "GPU given twice",
			setup: func(h *harness) {
				h.submit("two", spec(1, 2))
			},
			jobID:  "two",
			allocs: []structs.Allocation{alloc("x0", "n2", 0, gpuID("n2", 0), gpuID("n2", 0))},
			want:   "GPU GPU-n2-0 given twice",
		},
		{
			name: "unknown node",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n9", 1, gpuID("n9", 0)),
			},
			want: "node n9 not found",
		},
		{
			name: "node not ready",
			setup: func(h *harness) {
				n := node("n2", 3)
				n.Status = structs.NodeDraining
				h.register(n)
			},
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "node name-n2 is draining, not ready",
		},
		{
			name: "same node twice",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n1", 1, gpuID("n1", 1)),
			},
			want: "node name-n1 is used by two ranks",
		},
		{
			name: "rank twice",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 0, gpuID("n2", 0)),
			},
			want: "rank 0 placed twice",
		},
		{
			name: "rank out of range",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 2, gpuID("n2", 0)),
			},
			want: "rank 2 is out of range 0..1",
		},
		{
			name: "empty allocation id",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("", "n2", 1, gpuID("n2", 0)),
			},
			want: "allocation 1: empty allocation id",
		},
		{
			name: "allocation id exists",
			allocs: []structs.Allocation{
				alloc("held0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "allocation id held0 already exists",
		},
		{
			name: "allocation id twice",
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x0", "n2", 1, gpuID("n2", 0)),
			},
			want: "allocation id x0 used twice",
		},
		{
			name: "allocation names another job",
			allocs: []structs.Allocation{
				{ID: "x0", JobID: "held", NodeID: "n1", GPUs: []string{gpuID("n1", 2)}},
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "names job held, not job1",
		},
		{
			name: "CPUs differ from the spec",
			allocs: []structs.Allocation{
				{ID: "x0", NodeID: "n1", GPUs: []string{gpuID("n1", 2)}, CPUs: 31},
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "asks for 31 CPUs, job spec says 8",
		},
		{
			name: "not enough CPUs left",
			setup: func(h *harness) {
				n := node("n2", 3)
				n.CPUs = 12
				h.register(n)
				h.submit("cpu", structs.JobSpec{Command: []string{"x"}, CPUs: 8})
				h.place("cpu", alloc("c0", "n2", 0))
			},
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "node name-n2 has 4 of 12 CPUs free, job needs 8",
		},
		{
			name: "not enough memory left",
			setup: func(h *harness) {
				n := node("n2", 3)
				n.MemoryMiB = 1000
				h.register(n)
			},
			allocs: []structs.Allocation{
				alloc("x0", "n1", 0, gpuID("n1", 2)),
				alloc("x1", "n2", 1, gpuID("n2", 0)),
			},
			want: "node name-n2 has 1000 of 1000 MiB memory free, job needs 2048",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.register(node("n1", 3))
			h.register(node("n2", 3))
			h.submit("held", spec(1, 1))
			h.place("held", alloc("held0", "n1", 0, gpuID("n1", 0)))
			s := spec(2, 1)
			s.CPUs, s.MemoryMiB = 8, 2048
			h.submit("job1", s)
			if tc.setup != nil {
				tc.setup(h)
			}
			placement := structs.JobPlacement{JobID: cmp.Or(tc.jobID, "job1"), Allocations: tc.allocs}
			before, idx := h.f.Hash(), h.idx
			res := h.plan(structs.Plan{Placements: []structs.JobPlacement{placement}})
			if len(res.Rejected) != 1 || res.Rejected[0].JobID != placement.JobID || !strings.Contains(res.Rejected[0].Reason, tc.want) {
				t.Fatalf("rejected = %+v, want one for %s mentioning %q", res.Rejected, placement.JobID, tc.want)
			}
			if h.f.Hash() != before {
				t.Fatal("state changed after a rejected placement")
			}
			if h.f.Index() != idx+1 {
				t.Fatalf("index %d, want %d: a refused entry is still applied", h.f.Index(), idx+1)
			}
		})
	}
}

func TestFSM_Plan_RejectsJobsThatAreNotQueued(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("running", spec(1, 1))
	h.place("running", alloc("r0", "n1", 0, gpuID("n1", 0)))
	h.submit("done", spec(1, 0))
	h.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: "done", At: t0})
	before := h.f.Hash()

	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{
		{JobID: "running", Allocations: []structs.Allocation{alloc("r1", "n1", 0, gpuID("n1", 1))}},
		{JobID: "done", Allocations: []structs.Allocation{alloc("d0", "n1", 0)}},
		{JobID: "ghost", Allocations: []structs.Allocation{alloc("g0", "n1", 0)}},
	}})
	want := []string{"job is running, not queued", "job is cancelled, not queued", "job not found"}
	if len(res.Rejected) != len(want) {
		t.Fatalf("rejected = %+v", res.Rejected)
	}
	for i, w := range want {
		if res.Rejected[i].Reason != w {
			t.Fatalf("rejection %d = %q, want %q", i, res.Rejected[i].Reason, w)
		}
	}
	if h.f.Hash() != before {
		t.Fatal("state changed after rejected placements")
	}
}

func TestFSM_Plan_PlacementsAreIndependent(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 2))
	h.submit("a", spec(1, 1))
	h.submit("b", spec(1, 1))
	h.submit("c", spec(1, 1))
	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{
		{JobID: "a", Allocations: []structs.Allocation{alloc("a0", "n1", 0, gpuID("n1", 0))}},
		// b wants the GPU a just took: stale choice in the same plan.
		{JobID: "b", Allocations: []structs.Allocation{alloc("b0", "n1", 0, gpuID("n1", 0))}},
		{JobID: "c", Allocations: []structs.Allocation{alloc("c0", "n1", 0, gpuID("n1", 1))}},
	}})
	if len(res.Rejected) != 1 || res.Rejected[0].JobID != "b" || !strings.Contains(res.Rejected[0].Reason, "held by allocation a0") {
		t.Fatalf("rejected = %+v, want only b", res.Rejected)
	}
	for id, want := range map[string]structs.JobState{"a": structs.JobRunning, "b": structs.JobQueued, "c": structs.JobRunning} {
		if got := h.job(id).State; got != want {
			t.Fatalf("job %s is %s, want %s", id, got, want)
		}
	}
}

func TestFSM_Plan_BlockedSetsReasonOfQueuedJobs(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 1))
	h.submit("q", spec(1, 4))
	h.submit("r", spec(1, 1))
	h.place("r", alloc("r0", "n1", 0, gpuID("n1", 0)))
	rBefore := h.job("r")

	h.plan(structs.Plan{Blocked: []structs.JobBlocked{
		{JobID: "q", Reason: "no node has 4 healthy free GPUs"},
		{JobID: "r", Reason: "ignored: not queued"},
		{JobID: "ghost", Reason: "ignored: unknown"},
	}})
	q := h.job("q")
	if q.Reason != "no node has 4 healthy free GPUs" || q.ModifyIndex != h.idx {
		t.Fatalf("queued job after blocked: %+v", q)
	}
	if r := h.job("r"); r.Reason != "" || r.ModifyIndex != rBefore.ModifyIndex {
		t.Fatalf("running job changed by blocked: %+v", r)
	}

	// The same reason again changes nothing, not even the modify index.
	before := h.f.Hash()
	h.plan(structs.Plan{Blocked: []structs.JobBlocked{{JobID: "q", Reason: "no node has 4 healthy free GPUs"}}})
	if h.f.Hash() != before {
		t.Fatal("repeating a blocked reason changed state")
	}
}

func TestFSM_Plan_ZeroGPUJobIgnoresMissingNodeSizes(t *testing.T) {
	h := newHarness(t)
	n := node("n1", 0)
	n.CPUs, n.MemoryMiB = 0, 0 // the node does not report them: skip the check
	h.register(n)
	s := spec(1, 0)
	s.CPUs, s.MemoryMiB = 64, 1<<20
	h.submit("j", s)
	h.place("j", alloc("j0", "n1", 0))
	if a := h.alloc("j0"); a.GPUs == nil || len(a.GPUs) != 0 {
		t.Fatalf("0-GPU alloc GPUs = %#v, want an empty list", a.GPUs)
	}
}

func TestFSM_Plan_KeepsExclusiveJobsAlone(t *testing.T) {
	h := newHarness(t)
	h.register(node("n1", 4))
	h.register(node("n2", 4))
	ex := spec(1, 1)
	ex.Exclusive = true
	h.submit("ex", ex)
	h.submit("plain", spec(1, 1))
	h.submit("ex2", ex)
	h.place("ex", alloc("a-ex", "n1", 0, gpuID("n1", 0)))
	if a := h.alloc("a-ex"); !a.Exclusive {
		t.Fatalf("allocation of an --exclusive job: %+v, want Exclusive", a)
	}
	// One plan: a job joining ex's node, then one placed on n2, then an
	// exclusive job joining it, which sees the placement before it.
	res := h.plan(structs.Plan{Placements: []structs.JobPlacement{
		{JobID: "plain", Allocations: []structs.Allocation{alloc("a-p1", "n1", 0, gpuID("n1", 1))}},
		{JobID: "plain", Allocations: []structs.Allocation{alloc("a-p2", "n2", 0, gpuID("n2", 0))}},
		{JobID: "ex2", Allocations: []structs.Allocation{alloc("a-ex2", "n2", 0, gpuID("n2", 1))}},
	}})
	want := []structs.JobBlocked{
		{JobID: "plain", Reason: "allocation 0: node name-n1 is held by exclusive job ex"},
		{JobID: "ex2", Reason: "allocation 0: node name-n2 runs job plain, and the job is exclusive"},
	}
	if len(res.Rejected) != len(want) || res.Rejected[0] != want[0] || res.Rejected[1] != want[1] {
		t.Fatalf("rejected %+v, want %+v", res.Rejected, want)
	}
	if h.job("plain").State != structs.JobRunning || h.job("ex2").State != structs.JobQueued {
		t.Fatalf("plain %s, ex2 %s: want running and queued", h.job("plain").State, h.job("ex2").State)
	}
	// Once ex's allocation ends, its node is anyone's again.
	h.mustUpdate("n1", "a-ex", structs.AllocSucceeded, 0, "")
	h.place("ex2", alloc("a-ex2", "n1", 0, gpuID("n1", 0)))
}
