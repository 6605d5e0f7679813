package sched

import (
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func exclusive(s *structs.JobSpec) { s.Exclusive = true }

// exclusiveAlloc is a live allocation of an --exclusive job.
func exclusiveAlloc(a *structs.Allocation) *structs.Allocation {
	a.Exclusive = true
	return a
}

func TestPlace_Exclusive(t *testing.T) {
	// n1 runs a one-GPU job; n2 and n3 are idle.
	nodes := func() []*structs.Node {
		return []*structs.Node{gpuNode("n1", 8, "H100", 80), gpuNode("n2", 8, "H100", 80), gpuNode("n3", 8, "H100", 80)}
	}
	busy := running("r", "n1", 0, 0, "n1-g0")
	cases := []struct {
		name   string
		allocs []*structs.Allocation
		jobs   []*structs.Job
		want   []outcome
	}{
		{name: "an exclusive job skips a busy node, though packing would pick it",
			allocs: []*structs.Allocation{busy},
			jobs:   []*structs.Job{job("x", 1, exclusive)},
			want:   []outcome{{"x", "n2", ""}}},
		{name: "an exclusive job waits while every node runs something",
			allocs: []*structs.Allocation{busy, running("r2", "n2", 0, 0, "n2-g0"), running("r3", "n3", 0, 0)},
			jobs:   []*structs.Job{job("x", 1, exclusive)},
			want:   []outcome{{"x", "", "3 nodes: runs other jobs (this job is exclusive)"}}},
		{name: "no job joins a node an exclusive job holds, even one without GPUs",
			allocs: []*structs.Allocation{exclusiveAlloc(running("ex", "n1", 0, 0, "n1-g0")),
				exclusiveAlloc(running("ex2", "n2", 0, 0, "n2-g0")), exclusiveAlloc(running("ex3", "n3", 0, 0))},
			jobs: []*structs.Job{job("plain", 1), job("cpu-only", 0)},
			want: []outcome{{"plain", "", "3 nodes: held by an exclusive job"},
				{"cpu-only", "", "3 nodes: held by an exclusive job"}}},
		{name: "in one pass, the nodes an exclusive gang takes are closed to later jobs",
			jobs: []*structs.Job{job("gang", 1, gang(2), exclusive), job("next", 1), job("another", 1)},
			want: []outcome{{"gang", "n1,n2", ""}, {"next", "n3", ""}, {"another", "n3", ""}}},
		{name: "in one pass, an exclusive job does not join a node placed on before it",
			jobs: []*structs.Job{job("a", 1), job("b", 1, exclusive), job("c", 1, exclusive), job("d", 1, exclusive)},
			want: []outcome{{"a", "n1", ""}, {"b", "n2", ""}, {"c", "n3", ""},
				{"d", "", "2 nodes: held by an exclusive job; 1 node: runs other jobs (this job is exclusive)"}}},
		{name: "a node given up by a stopped allocation is idle again",
			allocs: []*structs.Allocation{func() *structs.Allocation {
				a := exclusiveAlloc(running("done", "n1", 0, 0, "n1-g0"))
				a.State = structs.AllocSucceeded
				return a
			}()},
			jobs: []*structs.Job{job("x", 1, exclusive), job("y", 8)},
			want: []outcome{{"x", "n1", ""}, {"y", "n2", ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := fakeState{nodes: nodes(), allocs: tc.allocs}
			plan := Place(st, tc.jobs)
			checkOutcomes(t, plan, tc.want)
			for _, p := range plan.Placements {
				j := tc.jobs[slices.IndexFunc(tc.jobs, func(j *structs.Job) bool { return j.ID == p.JobID })]
				for _, a := range p.Allocations {
					if a.Exclusive != j.Spec.Exclusive {
						t.Errorf("job %s: allocation exclusive %v, job's spec %v", j.ID, a.Exclusive, j.Spec.Exclusive)
					}
				}
			}
		})
	}
}

func TestSchedule_ExclusiveHeadReservesWholeNodes(t *testing.T) {
	// n1 runs a one-GPU job until 13:00; the exclusive head needs n1 to
	// itself (there is no other node) and reserves it from then. A job
	// ending before may use n1; a longer one may not, though GPUs are
	// spare.
	st := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80)},
		allocs: []*structs.Allocation{started("r1", "n1", 1, 0)},
		limits: map[string]time.Duration{"r1": time.Hour},
	}
	jobs := queue(job("head", 2, prio(1), exclusive), job("short", 1, limited(30*time.Minute)), job("long", 1, limited(2*time.Hour)))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"head", "", "first in line: 2 GPUs on 1 node reserved from ~13:00 UTC; 1 node: runs other jobs (this job is exclusive)"},
		{"short", "n1", ""},
		{"long", "", "1 node: reserved for higher-priority job head from ~13:00 UTC (this job's time limit ends later)"},
	})
}

func TestSchedule_ExclusiveJobCannotBackfillOntoAReservedNode(t *testing.T) {
	// The head, a gang of two, waits for 6 GPUs on n1 (4 back at 13:00)
	// and on n2, which is idle. An exclusive job that would outlast the
	// wait may not take n2, though it leaves 2 GPUs spare: the head could
	// not start beside it.
	st := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80), gpuNode("n2", 8, "A100", 80)},
		allocs: []*structs.Allocation{started("r1", "n1", 4, 0)},
		limits: map[string]time.Duration{"r1": time.Hour},
	}
	jobs := queue(job("head", 6, gang(2), prio(1)), job("ex-long", 0, exclusive, limited(2*time.Hour)),
		job("ex-short", 0, exclusive, limited(time.Hour)))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"head", "", "first in line: 12 GPUs on 2 nodes reserved from ~13:00 UTC; needs 2 nodes, 1 feasible; 1 node: not enough free GPUs"},
		{"ex-long", "", "1 node: reserved for higher-priority job head from ~13:00 UTC (this job's time limit ends later); " +
			"1 node: runs other jobs (this job is exclusive)"},
		// Ending when the head starts, it may.
		{"ex-short", "n2", ""},
	})
}

func TestPreemptions_Exclusive(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "H100", 80)}
	low := runningJob("low", 0, true, 0)
	pinned := runningJob("pinned", 0, false, 0)
	exLow := runningJob("ex-low", 0, true, 0)
	exLow.Spec.Exclusive = true
	high := func(opts ...func(*structs.JobSpec)) *structs.Job {
		return job("high", 1, append(opts, prio(5))...)
	}
	cases := []struct {
		name    string
		allocs  []*structs.Allocation
		running []*structs.Job
		job     *structs.Job
		want    []string
	}{
		{name: "an exclusive job stops the preemptible job sharing the node, though GPUs are free",
			allocs: []*structs.Allocation{running("low", "n1", 0, 0, "n1-g0")}, running: []*structs.Job{low},
			job: high(exclusive), want: []string{"low"}},
		{name: "nor can it run beside a job it may not stop",
			allocs:  []*structs.Allocation{running("low", "n1", 0, 0, "n1-g0"), running("pinned", "n1", 0, 0, "n1-g1")},
			running: []*structs.Job{low, pinned}, job: high(exclusive)},
		{name: "a job stops a preemptible exclusive job holding the node",
			allocs: []*structs.Allocation{exclusiveAlloc(running("ex-low", "n1", 0, 0, "n1-g0"))}, running: []*structs.Job{exLow},
			job: high(), want: []string{"ex-low"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Preemptions(fakeState{nodes: nodes, allocs: tc.allocs}, tc.job, tc.running)
			if !slices.Equal(got, tc.want) {
				t.Errorf("victims %v, want %v", got, tc.want)
			}
		})
	}
}
