package ui

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// Benchmark state: 100 nodes of 8 GPUs, 10,000 jobs: 800 running (one per
// GPU), 8,000 queued with a wait reason each, 1,200 finished.
const (
	benchNodes    = 100
	benchGPUs     = 8
	benchQueued   = 8000
	benchFinished = 1200
)

func benchState(b *testing.B) *state {
	st := newState(b)
	for n := range benchNodes {
		st.node(fmt.Sprintf("n%d", n+1), fmt.Sprintf("node-%03d", n), benchGPUs)
	}
	for n := range benchNodes {
		for g := range benchGPUs {
			id := fmt.Sprintf("run-%d-%d", n, g)
			st.submit(id, "alice", structs.JobSpec{Name: "train", GPUs: 1})
			st.run(id, fmt.Sprintf("n%d", n+1), g)
		}
	}
	for i := range benchFinished {
		id := fmt.Sprintf("done-%d", i)
		st.submit(id, "bob", structs.JobSpec{Name: "eval", GPUs: 1})
		st.apply(structs.JobCancelType, structs.JobCancelRequest{JobID: id, At: st.at()})
	}
	blocked := make([]structs.JobBlocked, 0, benchQueued)
	for i := range benchQueued {
		id := fmt.Sprintf("wait-%d", i)
		st.submit(id, "carol", structs.JobSpec{Name: "sweep", GPUs: 1 + i%8, Priority: i % 3})
		blocked = append(blocked, structs.JobBlocked{JobID: id, Reason: "waiting: no node has enough free GPUs (100 nodes: 100 with too few free GPUs)"})
	}
	st.apply(structs.PlanApplyType, structs.PlanApplyRequest{At: st.at(), Plan: structs.Plan{Blocked: blocked}})
	if got := len(st.f.Jobs()); got != benchNodes*benchGPUs+benchFinished+benchQueued {
		b.Fatalf("%d jobs in state, want 10,000", got)
	}
	return st
}

func benchPage(b *testing.B, target string) {
	h := newHarness(b, benchState(b), localTelemetry())
	c := h.client("reader-token")
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w := c.do(http.MethodGet, target, nil)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", target, w.Code)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/page")
}

func BenchmarkUI_Overview_10kJobs(b *testing.B) { benchPage(b, "/ui/") }
func BenchmarkUI_Queue_10kJobs(b *testing.B)    { benchPage(b, "/ui/queue") }
func BenchmarkUI_QueueLastPage_10kJobs(b *testing.B) {
	benchPage(b, fmt.Sprintf("/ui/queue?page=%d", benchQueued/queuePage))
}
func BenchmarkUI_Jobs_10kJobs(b *testing.B) { benchPage(b, "/ui/jobs") }
func BenchmarkUI_Node_10kJobs(b *testing.B) { benchPage(b, "/ui/nodes/n1") }
