package agent

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkSubmitToRunning measures, on an idle one-node agent, the time from
// a client's submit call to (a) the job's process being started by its
// supervisor and (b) the allocation being committed as running, which is
// what `skein job` shows. One job per iteration, each finished before the
// next is submitted; run with -benchtime 200x for p99 over 200 jobs.
func BenchmarkSubmitToRunning(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Shutdown()
	c, err := api.NewClient(a.HTTPAddr(), "")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	started := make([]time.Duration, 0, b.N)
	committed := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		job, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, GPUs: 1}})
		if err != nil {
			b.Fatal(err)
		}
		alloc := waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return al.State != structs.AllocPending })
		committed = append(committed, time.Since(t0))
		started = append(started, alloc.StartedAt.Sub(t0))
		waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return !al.Live() })
	}
	b.StopTimer()
	report(b, "started", started)
	report(b, "running", committed)
}

// waitAlloc blocks on the FSM's watch until the job's first allocation
// satisfies ok.
func waitAlloc(b *testing.B, a *Agent, jobID string, ok func(*structs.Allocation) bool) *structs.Allocation {
	deadline := time.After(30 * time.Second)
	for {
		_, changed := a.fsm.Watch()
		if allocs := a.fsm.Allocs(jobID); len(allocs) > 0 && ok(allocs[0]) {
			return allocs[0]
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("job %s: allocation did not reach the wanted state in 30s", structs.ShortID(jobID))
		}
	}
}

func report(b *testing.B, what string, d []time.Duration) {
	slices.Sort(d)
	pct := func(p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), what+"-p50-ms")
	b.ReportMetric(pct(0.99), what+"-p99-ms")
}
