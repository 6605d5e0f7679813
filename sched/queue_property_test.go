package sched

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
	"pgregory.net/rapid"
)

// genTimes gives a generated cluster its times at t0: running allocations
// started in the last three hours, most with a time limit; queued jobs get
// priorities, submission times in the last half hour and, half of them, a
// time limit. It returns the running jobs' limits.
func genTimes(t *rapid.T, allocs []*structs.Allocation, jobs []*structs.Job) map[string]time.Duration {
	limits := map[string]time.Duration{}
	for _, a := range allocs {
		a.StartedAt = t0.Add(-time.Duration(rapid.IntRange(0, 180).Draw(t, "startedMinutesAgo")) * time.Minute)
		if rapid.IntRange(0, 3).Draw(t, "allocLimited") > 0 {
			limits[a.JobID] = time.Duration(rapid.IntRange(1, 240).Draw(t, "allocLimitMinutes")) * time.Minute
		}
	}
	for _, j := range jobs {
		j.Spec.Priority = rapid.IntRange(0, 3).Draw(t, "priority")
		j.SubmittedAt = t0.Add(-time.Duration(rapid.IntRange(0, 30).Draw(t, "submittedMinutesAgo")) * time.Minute)
		if rapid.Bool().Draw(t, "limited") {
			j.Spec.TimeLimit = structs.Duration(time.Duration(rapid.IntRange(1, 240).Draw(t, "limitMinutes")) * time.Minute)
		}
	}
	return limits
}

func TestSchedule_PropertyPlanRespectsEveryInvariant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, allocs, jobs := genCluster(t)
		limits := genTimes(t, allocs, jobs)
		plan := Schedule(fakeState{nodes: nodes, allocs: allocs, limits: limits}, jobs, Options{Now: t0})
		checkPlan(t, nodes, allocs, jobs, plan)
	})
}

// The free-GPU index and the memory of blocked shapes are shortcuts: the
// plan must be the one checking every node for every job gives.
func TestSchedule_PropertyIndexPlacesLikeCheckingEveryNode(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, allocs, jobs := genCluster(t)
		st := fakeState{nodes: nodes, allocs: allocs, limits: genTimes(t, allocs, jobs)}
		backfill := rapid.Bool().Draw(t, "backfill")
		ordered := queueOrder(jobs, t0, 0, nil)

		fast := newPlacer(st, t0, backfill)
		got := fast.run(ordered)
		slow := newPlacer(st, t0, backfill)
		slow.reference = true
		want := slow.run(ordered)

		if !reflect.DeepEqual(got.Placements, want.Placements) {
			t.Fatalf("placements differ:\nindex     %+v\nreference %+v", got.Placements, want.Placements)
		}
		if !slices.Equal(blockedIDs(got), blockedIDs(want)) {
			t.Fatalf("blocked jobs differ: index %v, reference %v", blockedIDs(got), blockedIDs(want))
		}
		if (fast.res == nil) != (slow.res == nil) ||
			fast.res != nil && (fast.res.job != slow.res.job || fast.res.start != slow.res.start) {
			t.Fatalf("reservations differ: index %+v, reference %+v", fast.res, slow.res)
		}
	})
}

func blockedIDs(p structs.Plan) []string {
	out := make([]string, len(p.Blocked))
	for i, b := range p.Blocked {
		out[i] = b.JobID
	}
	return out
}

// Backfill never delays the head: once every job of the plan runs, the
// first blocked job can still start no later than its reservation said.
func TestSchedule_PropertyBackfillNeverDelaysTheHead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, allocs, jobs := genBusyCluster(t)
		limits := genTimes(t, allocs, jobs)
		p := newPlacer(fakeState{nodes: nodes, allocs: allocs, limits: limits}, t0, true)
		plan := p.run(queueOrder(jobs, t0, 0, nil))
		if p.res == nil {
			return
		}
		// Run the plan: its allocations start now, with their jobs' limits.
		after := fakeState{nodes: nodes, allocs: slices.Clone(allocs), limits: maps.Clone(limits)}
		for _, jp := range plan.Placements {
			for _, a := range jp.Allocations {
				a.StartedAt = t0
				after.allocs = append(after.allocs, &a)
			}
			for _, j := range jobs {
				if j.ID == jp.JobID && j.Spec.TimeLimit > 0 {
					after.limits[j.ID] = time.Duration(j.Spec.TimeLimit)
				}
			}
		}
		q := newPlacer(after, t0, true)
		r, err := newRequest(p.res.job, q.l)
		if err != nil {
			t.Fatal(err)
		}
		again := q.reserve(r)
		if again == nil {
			t.Fatalf("head %s had a reservation; after backfill it can never start", p.res.job.ID)
		}
		if again.start > p.res.start {
			t.Fatalf("head %s reserved from %v; after backfill it can start only at %v", p.res.job.ID,
				time.Unix(0, p.res.start).UTC(), time.Unix(0, again.start).UTC())
		}
	})
}

// genBusyCluster draws a cluster that is mostly busy and a queue of jobs
// bigger than what is free, so that the first blocked job usually gets a
// reservation and the jobs behind it compete for backfill.
func genBusyCluster(t *rapid.T) ([]*structs.Node, []*structs.Allocation, []*structs.Job) {
	var nodes []*structs.Node
	var allocs []*structs.Allocation
	for i := range rapid.IntRange(1, 5).Draw(t, "nodes") {
		id := fmt.Sprintf("n%d", i)
		n := gpuNode(id, rapid.IntRange(1, 8).Draw(t, "gpus"), "A100", 80,
			withCPUs(rapid.SampledFrom([]int{0, 16, 64}).Draw(t, "cpus")))
		nodes = append(nodes, n)
		var held []string
		for _, g := range n.GPUs {
			if rapid.IntRange(0, 2).Draw(t, "busy") > 0 {
				held = append(held, g.UUID)
			}
			if len(held) > 0 && rapid.Bool().Draw(t, "split") {
				allocs = append(allocs, running(fmt.Sprintf("old%d", len(allocs)), id,
					rapid.IntRange(0, 8).Draw(t, "allocCPUs"), 0, held...))
				held = nil
			}
		}
		if len(held) > 0 {
			allocs = append(allocs, running(fmt.Sprintf("old%d", len(allocs)), id, 0, 0, held...))
		}
	}
	jobs := make([]*structs.Job, rapid.IntRange(1, 12).Draw(t, "jobs"))
	for i := range jobs {
		jobs[i] = job(fmt.Sprintf("j%d", i), rapid.IntRange(0, 8).Draw(t, "jobGPUs"),
			gang(rapid.IntRange(1, 3).Draw(t, "jobNodes")), cpus(rapid.IntRange(0, 16).Draw(t, "jobCPUs")))
	}
	return nodes, allocs, jobs
}

// simJob is a job of the simulation and how many ticks it really runs.
type simJob struct {
	job  *structs.Job
	runs int
}

// simulate runs a cluster for horizon ticks of a minute: each tick, the
// allocations whose run is over end, the jobs arriving that tick join the
// queue and one pass plans the queue; placed jobs start at once. It returns
// the tick each job started at.
func simulate(nodes []*structs.Node, arrivals func(tick int) []simJob, horizon int,
	pass func(st State, queued []*structs.Job, now time.Time) structs.Plan) map[string]int {
	type live struct {
		alloc *structs.Allocation
		ends  int
	}
	var running []live
	var queued []*structs.Job
	runs := map[string]int{}
	limits := map[string]time.Duration{}
	startedAt := map[string]int{}
	for tick := range horizon {
		now := t0.Add(time.Duration(tick) * time.Minute)
		running = slices.DeleteFunc(running, func(l live) bool { return l.ends <= tick })
		for _, a := range arrivals(tick) {
			a.job.SubmittedAt = now
			runs[a.job.ID] = a.runs
			queued = append(queued, a.job)
		}
		st := fakeState{nodes: nodes, limits: limits}
		for _, l := range running {
			st.allocs = append(st.allocs, l.alloc)
		}
		plan := pass(st, queued, now)
		for _, jp := range plan.Placements {
			startedAt[jp.JobID] = tick
			for _, a := range jp.Allocations {
				a.StartedAt = now
				running = append(running, live{&a, tick + runs[jp.JobID]})
			}
			queued = slices.DeleteFunc(queued, func(j *structs.Job) bool {
				if j.ID == jp.JobID && j.Spec.TimeLimit > 0 {
					limits[j.ID] = time.Duration(j.Spec.TimeLimit)
				}
				return j.ID == jp.JobID
			})
		}
	}
	return startedAt
}

func schedulePass(st State, queued []*structs.Job, now time.Time) structs.Plan {
	return Schedule(st, queued, Options{Now: now, AgeStep: time.Minute})
}

// No job starves: under a stream of jobs that keeps the cluster busy, with
// any mix of priorities, sizes, gangs and time limits (jobs without a limit
// run a few minutes too), every job that arrived early has started well
// before the end. Aging brings it to the head of the queue within a few
// minutes; its reservation then keeps backfill from pushing it back.
func TestSchedule_PropertyNoJobStarves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nNodes := rapid.IntRange(1, 3).Draw(t, "nodes")
		perNode := rapid.IntRange(1, 4).Draw(t, "gpusPerNode")
		var nodes []*structs.Node
		for i := range nNodes {
			nodes = append(nodes, gpuNode(fmt.Sprintf("n%d", i), perNode, "A100", 80))
		}
		const early, horizon = 10, 300
		n := 0
		arrivals := func(tick int) []simJob {
			if !rapid.Bool().Draw(t, "arrives") {
				return nil
			}
			n++
			j := job(fmt.Sprintf("j%03d", n), rapid.IntRange(1, perNode).Draw(t, "gpus"),
				gang(rapid.IntRange(1, nNodes).Draw(t, "gang")), prio(rapid.IntRange(0, 5).Draw(t, "priority")))
			runs := rapid.IntRange(1, 4).Draw(t, "runs")
			if rapid.IntRange(0, 3).Draw(t, "limited") > 0 {
				j.Spec.TimeLimit = structs.Duration(time.Duration(runs+rapid.IntRange(0, 2).Draw(t, "slack")) * time.Minute)
			}
			if tick < early {
				j.ID = "early-" + j.ID
			}
			return []simJob{{j, runs}}
		}
		var earlyIDs []string
		record := func(tick int) []simJob {
			js := arrivals(tick)
			for _, s := range js {
				if tick < early {
					earlyIDs = append(earlyIDs, s.job.ID)
				}
			}
			return js
		}
		startedAt := simulate(nodes, record, horizon, schedulePass)
		for _, id := range earlyIDs {
			if _, ok := startedAt[id]; !ok {
				t.Fatalf("job %s arrived before minute %d and had not started after %d minutes", id, early, horizon)
			}
		}
	})
}

// Without reservations (Place in queue order: greedy backfill) a whole-node
// job waits forever behind a stream of one-GPU jobs that keep some GPU of
// the node busy; Schedule starts it within minutes.
func TestSchedule_BigJobIsNotStarvedBySmallOnes(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 4, "A100", 80)}
	arrivals := func(tick int) []simJob {
		var js []simJob
		if tick == 1 {
			js = append(js, simJob{job("big", 4, limited(3*time.Minute)), 3})
		}
		// Two one-GPU jobs a minute, each running two minutes: the node
		// is never empty.
		for k := range 2 {
			js = append(js, simJob{job(fmt.Sprintf("small-%03d-%d", tick, k), 1, prio(3), limited(2*time.Minute)), 2})
		}
		return js
	}
	greedy := func(st State, queued []*structs.Job, now time.Time) structs.Plan {
		return Place(st, queueOrder(queued, now, time.Minute, nil))
	}
	if at, ok := simulate(nodes, arrivals, 120, greedy)["big"]; ok {
		t.Fatalf("greedy backfill started the big job at minute %d; the scenario no longer shows starvation", at)
	}
	at, ok := simulate(nodes, arrivals, 120, schedulePass)["big"]
	if !ok || at > 10 {
		t.Fatalf("big job started at minute %d (started: %v), want within 10 minutes", at, ok)
	}
}

// The same on a slice of the benchmark's workload, where nearly every job
// goes through the index: 200 uniform nodes, 2,000 jobs of every shape.
func TestSchedule_IndexPlacesLikeCheckingEveryNodeOnTheBenchmarkWorkload(t *testing.T) {
	st, jobs, now := smallQueue()
	ordered := queueOrder(jobs, now, 0, nil)
	fast := newPlacer(st, now, true)
	got := fast.run(ordered)
	slow := newPlacer(st, now, true)
	slow.reference = true
	want := slow.run(ordered)
	if !reflect.DeepEqual(got.Placements, want.Placements) || !slices.Equal(blockedIDs(got), blockedIDs(want)) {
		t.Fatalf("index placed %d jobs, reference %d; the plans differ", len(got.Placements), len(want.Placements))
	}
	if fast.res == nil || slow.res == nil || fast.res.job != slow.res.job || fast.res.start != slow.res.start {
		t.Fatalf("reservations differ: index %+v, reference %+v", fast.res, slow.res)
	}
	if len(got.Placements) < 100 {
		t.Fatalf("only %d jobs placed; the workload no longer exercises the index", len(got.Placements))
	}
}
