package sched

import (
	"fmt"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// BenchmarkPlace plans 1,000 mixed queued jobs on 5,000 8-GPU nodes, a
// quarter of whose GPUs are already held (DESIGN.md §11, B1), and reports
// placements (allocations) per second.
func BenchmarkPlace(b *testing.B) {
	models := []string{"A100", "H100"}
	nodes := make([]*structs.Node, 5000)
	var allocs []*structs.Allocation
	for i := range nodes {
		id := fmt.Sprintf("node-%04d", i)
		nodes[i] = gpuNode(id, 8, models[i%2], 80, withLabels("zone", fmt.Sprint(i%4)))
		if i%2 == 0 {
			allocs = append(allocs, running(fmt.Sprintf("old-%d", i), id, 16, 64<<10,
				id+"-g0", id+"-g1", id+"-g2", id+"-g3"))
		}
	}
	jobs := make([]*structs.Job, 1000)
	for i := range jobs {
		var opts []func(*structs.JobSpec)
		if i%3 == 0 {
			opts = append(opts, model(models[i%2]))
		}
		if i%10 == 0 {
			opts = append(opts, gang(4))
		}
		if i%7 == 0 {
			opts = append(opts, constraint("zone", "1"))
		}
		opts = append(opts, cpus(4*(i%5)), memGiB(int64(8*(i%3))))
		jobs[i] = job(fmt.Sprintf("job-%04d", i), []int{1, 2, 4, 8}[i%4], opts...)
	}
	st := fakeState{nodes: nodes, allocs: allocs}

	placed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		plan := Place(st, jobs)
		for _, jp := range plan.Placements {
			placed += len(jp.Allocations)
		}
	}
	if placed == 0 {
		b.Fatal("nothing placed")
	}
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
}
