package sched

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// started returns a live allocation of jobID holding the first n GPUs of
// node nodeID since t0+at.
func started(jobID, nodeID string, n int, at time.Duration) *structs.Allocation {
	gpus := make([]string, n)
	for i := range gpus {
		gpus[i] = nodeID + "-g" + string(rune('0'+i))
	}
	a := running(jobID, nodeID, 0, 0, gpus...)
	a.StartedAt = t0.Add(at)
	return a
}

// limited gives a job a time limit.
func limited(d time.Duration) func(*structs.JobSpec) {
	return func(s *structs.JobSpec) { s.TimeLimit = structs.Duration(d) }
}

func prio(p int) func(*structs.JobSpec) { return func(s *structs.JobSpec) { s.Priority = p } }

// queue stamps the jobs as submitted one second apart, in the order given,
// ending at t0.
func queue(jobs ...*structs.Job) []*structs.Job {
	for i, j := range jobs {
		j.SubmittedAt = t0.Add(time.Duration(i-len(jobs)) * time.Second)
	}
	return jobs
}

type outcome struct{ job, placed, reason string }

// checkOutcomes compares each job's node list (or "") and blocked reason.
func checkOutcomes(t *testing.T, plan structs.Plan, want []outcome) {
	t.Helper()
	for _, w := range want {
		var nodes []string
		for _, jp := range plan.Placements {
			if jp.JobID == w.job {
				for _, a := range jp.Allocations {
					nodes = append(nodes, a.NodeID)
				}
			}
		}
		if w.placed != "" && joinNodes(nodes) != w.placed {
			t.Errorf("job %s placed on %v, want %s", w.job, nodes, w.placed)
		}
		if w.placed == "" && len(nodes) > 0 {
			t.Errorf("job %s placed on %v, want it blocked", w.job, nodes)
		}
		if got := blockedReason(plan, w.job); got != w.reason {
			t.Errorf("job %s reason\n got %q\nwant %q", w.job, got, w.reason)
		}
	}
}

func joinNodes(nodes []string) string {
	out := ""
	for i, n := range nodes {
		if i > 0 {
			out += ","
		}
		out += n
	}
	return out
}

func TestSchedule_BackfillAroundTheHeadsReservation(t *testing.T) {
	st := fakeState{
		nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80), gpuNode("n2", 8, "A100", 80)},
		// n1: 4 GPUs free, 4 back at 12:30. n2: 2 free, 6 back at 14:00.
		allocs: []*structs.Allocation{started("r1", "n1", 4, -30*time.Minute), started("r2", "n2", 6, 0)},
		limits: map[string]time.Duration{"r1": time.Hour, "r2": 2 * time.Hour},
	}
	jobs := queue(
		job("big", 8, prio(10)),
		job("nolimit", 1),
		job("nolimit2", 2),
		job("short", 2, limited(20*time.Minute)),
		job("long", 1, limited(time.Hour)),
	)
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"big", "", "first in line: 8 GPUs on 1 node reserved from ~12:30 UTC; 2 nodes: not enough free GPUs"},
		// n1 is reserved whole: a job without a limit goes to n2.
		{"nolimit", "n2", ""},
		{"nolimit2", "", "1 node: not enough free GPUs; " +
			"1 node: reserved for higher-priority job big from ~12:30 UTC (a job without a time limit cannot backfill)"},
		// Ends at 12:20, before big can start: it may use n1.
		{"short", "n1", ""},
		// Would end at 13:00: not on n1, but n2 has a GPU left.
		{"long", "n2", ""},
	})
}

func TestSchedule_LongJobIsToldItsLimitEndsTooLate(t *testing.T) {
	st := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80)},
		allocs: []*structs.Allocation{started("r1", "n1", 4, 0)},
		limits: map[string]time.Duration{"r1": time.Hour},
	}
	jobs := queue(job("big", 8, prio(1)), job("late", 1, limited(2*time.Hour)), job("early", 4, limited(time.Hour)))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"big", "", "first in line: 8 GPUs on 1 node reserved from ~13:00 UTC; 1 node: not enough free GPUs"},
		{"late", "", "1 node: reserved for higher-priority job big from ~13:00 UTC (this job's time limit ends later)"},
		// Ending exactly when the head starts does not delay it.
		{"early", "n1", ""},
	})
}

func TestSchedule_JobsMayUseAReservedNodesSpare(t *testing.T) {
	// n1 has 4 GPUs free and 4 back at 12:30; the head needs 6, so at
	// 12:30 two are spare and a job without a limit may hold them.
	st := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80)},
		allocs: []*structs.Allocation{started("r1", "n1", 4, -30*time.Minute)},
		limits: map[string]time.Duration{"r1": time.Hour},
	}
	jobs := queue(job("head", 6, prio(1)), job("fits-spare", 2), job("past-spare", 1))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"head", "", "first in line: 6 GPUs on 1 node reserved from ~12:30 UTC; 1 node: not enough free GPUs"},
		{"fits-spare", "n1", ""},
		{"past-spare", "", "1 node: reserved for higher-priority job head from ~12:30 UTC (a job without a time limit cannot backfill)"},
	})
}

func TestSchedule_UnknownEndReservesForLimitedJobsOnly(t *testing.T) {
	// The work on n1 has no time limit: nobody knows when the head can
	// start. Jobs with a limit still backfill; jobs without one would hold
	// the head's GPUs for just as unknown a time and may not.
	st := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80)},
		allocs: []*structs.Allocation{started("forever", "n1", 4, 0)},
	}
	jobs := queue(job("head", 8, prio(1)), job("nolimit", 1), job("limit", 1, limited(100*time.Hour)))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"head", "", "first in line: 8 GPUs on 1 node reserved for when running jobs without a time limit end; " +
			"1 node: not enough free GPUs"},
		{"nolimit", "", "1 node: reserved for higher-priority job head for when running jobs without a time limit end " +
			"(a job without a time limit cannot backfill)"},
		{"limit", "n1", ""},
	})
}

func TestSchedule_JobThatCanNeverRunReservesNothing(t *testing.T) {
	st := fakeState{
		nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80, withLabels("zone", "a"))},
		allocs: []*structs.Allocation{started("r1", "n1", 4, 0)},
		limits: map[string]time.Duration{"r1": time.Hour},
	}
	jobs := queue(
		job("elsewhere", 1, prio(9), constraint("zone", "b")),
		job("too-big", 8, prio(8), gang(2)),
		job("head", 8, prio(7)),
		job("nolimit", 1),
	)
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"elsewhere", "", "1 node: missing constraint zone=b"},
		{"too-big", "", "needs 2 nodes, 0 feasible; 1 node: not enough free GPUs"},
		{"head", "", "first in line: 8 GPUs on 1 node reserved from ~13:00 UTC; 1 node: not enough free GPUs"},
		{"nolimit", "", "1 node: reserved for higher-priority job head from ~13:00 UTC (a job without a time limit cannot backfill)"},
	})
}

func TestSchedule_GangReservesTheNodesThatFreeFirst(t *testing.T) {
	st := fakeState{
		nodes: []*structs.Node{
			gpuNode("n1", 8, "A100", 80), gpuNode("n2", 8, "A100", 80),
			gpuNode("n3", 8, "A100", 80), gpuNode("n4", 8, "A100", 80),
		},
		// n1 frees at 12:10, n2 at 12:20, n3 at 15:00; n4 is free now.
		allocs: []*structs.Allocation{
			started("r1", "n1", 8, -50*time.Minute), started("r2", "n2", 8, -40*time.Minute), started("r3", "n3", 8, 0),
		},
		limits: map[string]time.Duration{"r1": time.Hour, "r2": time.Hour, "r3": 3 * time.Hour},
	}
	jobs := queue(job("gang", 8, prio(1), gang(2)), job("nolimit", 8), job("quick", 8, limited(5*time.Minute)))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"gang", "", "first in line: 16 GPUs on 2 nodes reserved from ~12:10 UTC; needs 2 nodes, 1 feasible; 3 nodes: not enough free GPUs"},
		{"nolimit", "", "3 nodes: not enough free GPUs; " +
			"1 node: reserved for higher-priority job gang from ~12:10 UTC (a job without a time limit cannot backfill)"},
		{"quick", "n4", ""},
	})
}

func TestSchedule_ReservationCountsJobsPlacedEarlierInThePass(t *testing.T) {
	st := fakeState{nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80)}}
	jobs := queue(job("first", 8, prio(2), limited(time.Hour)), job("second", 8, prio(1)))
	checkOutcomes(t, Schedule(st, jobs, Options{Now: t0}), []outcome{
		{"first", "n1", ""},
		{"second", "", "first in line: 8 GPUs on 1 node reserved from ~13:00 UTC; 1 node: not enough free GPUs"},
	})
}

func TestSchedule_ReservationTimeIsSaidPlainly(t *testing.T) {
	cases := []struct {
		name    string
		started time.Duration
		limit   time.Duration
		want    string
	}{
		{"later today", 0, 3 * time.Hour, "reserved from ~15:00 UTC"},
		{"another day", 0, 48 * time.Hour, "reserved from ~Dec 2 12:00 UTC"},
		{"holder past its limit", -2 * time.Hour, time.Hour, "reserved for when jobs past their time limit stop"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := fakeState{
				nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80)},
				allocs: []*structs.Allocation{started("r1", "n1", 8, tc.started)},
				limits: map[string]time.Duration{"r1": tc.limit},
			}
			plan := Schedule(st, queue(job("head", 1)), Options{Now: t0})
			want := "first in line: 1 GPU on 1 node " + tc.want + "; 1 node: not enough free GPUs"
			if got := blockedReason(plan, "head"); got != want {
				t.Errorf("reason\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestSchedule_HigherPriorityJobSubmittedLaterRunsFirst(t *testing.T) {
	st := fakeState{nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80)}}
	low, high := job("low", 8), job("high", 8, prio(5))
	low.SubmittedAt, high.SubmittedAt = t0.Add(-time.Minute), t0
	checkOutcomes(t, Schedule(st, []*structs.Job{low, high}, Options{Now: t0}), []outcome{
		{"high", "n1", ""},
		{"low", "", "first in line: 8 GPUs on 1 node reserved for when running jobs without a time limit end; " +
			"1 node: not enough free GPUs"},
	})
	// Five minutes of waiting are worth five points: a low job that came
	// five minutes earlier ties the high one and goes first.
	low.SubmittedAt = t0.Add(-5 * time.Minute)
	checkOutcomes(t, Schedule(st, []*structs.Job{high, low}, Options{Now: t0}), []outcome{
		{"low", "n1", ""},
	})
}

func TestSchedule_InputOrderDoesNotMatter(t *testing.T) {
	st, jobs, now := smallQueue()
	first := Schedule(st, jobs, Options{Now: now})
	reversed := slices.Clone(jobs)
	slices.Reverse(reversed)
	if second := Schedule(st, reversed, Options{Now: now}); !reflect.DeepEqual(first, second) {
		t.Fatal("the order jobs were listed in changed the plan")
	}
	if len(first.Placements) == 0 || len(first.Blocked) == 0 {
		t.Fatalf("want a mix of placed and blocked jobs, got %d and %d", len(first.Placements), len(first.Blocked))
	}
}

// smallQueue is a slice of the benchmark's workload: 200 nodes, 2,000 jobs.
func smallQueue() (fakeState, []*structs.Job, time.Time) {
	st, jobs, now := queueBench()
	var nodes []*structs.Node
	keep := map[string]bool{}
	for _, n := range st.nodes[:200] {
		nodes = append(nodes, n)
		keep[n.ID] = true
	}
	var allocs []*structs.Allocation
	for _, a := range st.allocs {
		if keep[a.NodeID] {
			allocs = append(allocs, a)
		}
	}
	return fakeState{nodes: nodes, allocs: allocs, limits: st.limits}, jobs[:2000], now
}
