package sched

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkPlace plans 1,000 mixed queued jobs on 5,000 8-GPU nodes, a
// quarter of whose GPUs are already held (B1 of BENCHMARKS.md, "Where
// things stand"), and reports placements (allocations) per second.
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
		opts = append(opts, cpus(4*(i%5)), memGiB(structs.SizeMiB(8*(i%3))))
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

// queueBench builds the B1 queue workload: 5,000 8-GPU nodes (two GPU
// models, four zones), half of them running a 4-GPU job (some with a time
// limit, so a blocked head gets a reservation), and 100,000 queued jobs:
// 1-8 GPUs with CPUs and memory in proportion, about 5% gangs of 2-8
// whole nodes, 10% with a zone constraint, a third asking for a GPU model,
// 20% with a time limit, four priorities, submitted over the last hours.
func queueBench() (fakeState, []*structs.Job, time.Time) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	models := []string{"A100", "H100"}
	st := fakeState{limits: map[string]time.Duration{}}
	for i := range 5000 {
		id := fmt.Sprintf("node-%04d", i)
		st.nodes = append(st.nodes, gpuNode(id, 8, models[i%2], 80, withLabels("zone", fmt.Sprint(i%4))))
		if i%2 == 0 {
			a := running(fmt.Sprintf("old-%d", i), id, 32, 256<<10, id+"-g0", id+"-g1", id+"-g2", id+"-g3")
			a.StartedAt = now.Add(-time.Duration(i%60) * time.Minute)
			if i%3 != 0 {
				st.limits[a.JobID] = time.Duration(1+i%4) * time.Hour
			}
			st.allocs = append(st.allocs, a)
		}
	}
	jobs := make([]*structs.Job, 100_000)
	for i := range jobs {
		g := []int{1, 1, 2, 4, 8}[i%5]
		var opts []func(*structs.JobSpec)
		if i%20 == 7 {
			g = 8
			opts = append(opts, gang(2+i%7))
		}
		if i%10 == 3 {
			opts = append(opts, constraint("zone", fmt.Sprint(i%4)))
		}
		if i%3 == 0 {
			opts = append(opts, model(models[(i/3)%2]))
		}
		opts = append(opts, cpus(8*g), memGiB(structs.SizeMiB(64*g)), func(s *structs.JobSpec) {
			s.Priority = []int{0, 0, 5, 10}[(i/7)%4]
			if (i/5)%5 == 1 {
				s.TimeLimit = structs.Duration(time.Duration(1+i%8) * 15 * time.Minute)
			}
		})
		j := job(fmt.Sprintf("job-%06d", i), g, opts...)
		j.SubmittedAt = now.Add(-time.Duration(100_000-i) * 100 * time.Millisecond)
		jobs[i] = j
	}
	return st, jobs, now
}

// BenchmarkPlaceQueue is B1 at queue scale: one Schedule pass (ordering,
// aging, placement and backfill around the head's reservation) over the
// queueBench workload per iteration. It reports placements (allocations)
// per second and the 99th-percentile time of one pass.
func BenchmarkPlaceQueue(b *testing.B) {
	st, jobs, now := queueBench()
	benchPasses(b, func() structs.Plan { return Schedule(st, jobs, Options{Now: now}) })
}

// BenchmarkDecideQueue is BenchmarkPlaceQueue through the whole pass:
// Decide over a view of the same workload, whose running jobs (of the live
// allocations) are not preemptible, adds backoff, dependencies, array caps,
// the overlays, the preemption bookkeeping, MASTER_PORTs and the changed
// reasons to the Schedule inside it.
func BenchmarkDecideQueue(b *testing.B) {
	st, jobs, now := queueBench()
	v := fakeView{fakeState: st, queued: jobs}
	for _, a := range st.allocs {
		r := job(a.JobID, len(a.GPUs))
		r.State = structs.JobRunning
		v.running = append(v.running, r)
	}
	in := Inputs{Now: now}
	benchPasses(b, func() structs.Plan { return Decide(v, in).Plan })
}

// BenchmarkDecideQueueFairShare is B13: BenchmarkDecideQueue with fair
// share on: 20 accounts (4 of them sub-accounts) of 5 users each, every
// user with decayed usage, every job in one of its owner's accounts, a
// third with a QoS, and the default weights. Users submit in bursts of
// SKEIN_BENCH_BURST jobs (25 by default: an array, a sweep; 1 deals the
// jobs out one by one, the order a CPU cache likes least). Its ratio to
// BenchmarkDecideQueue is the cost of fair share.
func BenchmarkDecideQueueFairShare(b *testing.B) {
	v, now := fairShareBench()
	in := Inputs{Now: now}
	benchPasses(b, func() structs.Plan { return Decide(v, in).Plan })
}

// BenchmarkFairShareAgainstB1 is B13 as one ratio: each iteration runs
// BenchmarkDecideQueue's pass and BenchmarkDecideQueueFairShare's, one
// after the other (alternating which goes first, each after a garbage
// collection), so a machine shared with other work slows both alike.
// It reports each one's mean pass and placements per second, and the
// ratio of the fair-share pass's time per placement to the plain one's.
func BenchmarkFairShareAgainstB1(b *testing.B) {
	fs, now := fairShareBench()
	plain := fakeView{fakeState: fs.fakeState, running: fs.running}
	_, plain.queued, _ = queueBench()
	in := Inputs{Now: now}
	var tPlain, tFS time.Duration
	var nPlain, nFS int
	b.ResetTimer()
	for i := range b.N {
		// Alternate which goes first, and leave neither the other's
		// garbage to collect.
		for k := range 2 {
			runtime.GC()
			start := time.Now()
			if (i+k)%2 == 0 {
				nPlain += placements(Decide(plain, in).Plan)
				tPlain += time.Since(start)
			} else {
				nFS += placements(Decide(fs, in).Plan)
				tFS += time.Since(start)
			}
		}
	}
	b.ReportMetric(float64(tPlain.Milliseconds())/float64(b.N), "b1-pass-ms")
	b.ReportMetric(float64(tFS.Milliseconds())/float64(b.N), "fairshare-pass-ms")
	b.ReportMetric(float64(nPlain)/tPlain.Seconds(), "b1-placements/s")
	b.ReportMetric(float64(nFS)/tFS.Seconds(), "fairshare-placements/s")
	b.ReportMetric((tFS.Seconds()/float64(nFS))/(tPlain.Seconds()/float64(nPlain)), "ratio-per-placement")
}

// placements counts a plan's allocations.
func placements(p structs.Plan) int {
	n := 0
	for _, pl := range p.Placements {
		n += len(pl.Allocations)
	}
	return n
}

// fairShareBench is BenchmarkDecideQueueFairShare's view and time.
func fairShareBench() (fakeView, time.Time) {
	st, jobs, now := queueBench()
	tab := &structs.AccountTable{Accounts: map[string]*structs.Account{},
		QoS: map[string]*structs.QoS{"high": {Name: "high", Priority: 500}, "low": {Name: "low"}}}
	var usage []structs.UsageRecord
	for a := range 20 {
		name := fmt.Sprintf("acct-%02d", a)
		acct := &structs.Account{Name: name, Shares: 1 + a*7%50}
		if a >= 16 {
			acct.Parent = fmt.Sprintf("acct-%02d", a-16)
		}
		for u := range 5 {
			user := fmt.Sprintf("user-%02d-%d", a, u)
			acct.Users = append(acct.Users, user)
			usage = append(usage, structs.UsageRecord{UsageKey: structs.UsageKey{Account: name, User: user},
				Usage: structs.Usage{GPUSeconds: float64(1+(a*5+u)*37%100) * 3600}})
		}
		tab.Accounts[name] = acct
	}
	burst := 25
	if v, err := strconv.Atoi(os.Getenv("SKEIN_BENCH_BURST")); err == nil && v > 0 {
		burst = v
	}
	for i, j := range jobs {
		c := j.Copy()
		b := i / burst
		a := b % 20
		c.Spec.Account, c.Owner = fmt.Sprintf("acct-%02d", a), fmt.Sprintf("user-%02d-%d", a, (b/20)%5)
		c.Spec.QoS = []string{"", "high", "low"}[i%3]
		jobs[i] = c
	}
	v := fakeView{fakeState: st, queued: jobs, fairShare: structs.FairShare{Accounts: tab, Usage: usage}}
	for _, a := range st.allocs {
		r := job(a.JobID, len(a.GPUs))
		r.State = structs.JobRunning
		v.running = append(v.running, r)
	}
	return v, now
}

// benchPasses runs one pass per iteration and reports placements
// (allocations) per second, per pass, and the 99th-percentile pass time.
func benchPasses(b *testing.B, pass func() structs.Plan) {
	placed := 0
	var passes []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		plan := pass()
		passes = append(passes, time.Since(start))
		for _, jp := range plan.Placements {
			placed += len(jp.Allocations)
		}
	}
	if placed == 0 {
		b.Fatal("nothing placed")
	}
	slices.Sort(passes)
	b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
	b.ReportMetric(float64(placed)/float64(len(passes)), "placements/pass")
	b.ReportMetric(float64(testutil.Percentile(passes, 0.99))/float64(time.Millisecond), "p99-pass-ms")
}
