package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// failoverObserve is how long after a leader's death the benchmark
// watches the sims before it counts what went wrong: past --stop-after
// (a sim whose lease lapsed would have fenced itself by then) and
// --down-after (the new leader would have marked a silent sim down and
// declared its allocations lost).
const failoverObserve = 6 * time.Second

// BenchmarkWorkerFailover measures B2 at many workers: three
// real server agent processes (voters, --standbys 0) and
// SKEIN_BENCH_WORKERS simulated workers (default 1,000) running
// SKEIN_BENCH_JOBS jobs (default 1,000, one GPU each, that run for an
// hour). Each of SKEIN_BENCH_ROUNDS rounds (default 5) kills the leader's
// process (SIGKILL) and submits through a surviving server until a
// submission is acknowledged: the figure is the time from the kill to
// that acknowledgement, p50 and p99 over the rounds. After each it waits
// failoverObserve, restarts the killed agent on its data dir and waits
// until every node is ready in the restarted server's own state. It counts
// what a failover must not cost the workers: a sim marked down (as its
// view says), a sim that went --stop-after without a renewed lease, an
// allocation ended under a running sim, and a job run a second time;
// each is an error. -benchtime 1x.
func BenchmarkWorkerFailover(b *testing.B) {
	workers := testutil.EnvInt(b, "SKEIN_BENCH_WORKERS", 1000)
	jobs := testutil.EnvInt(b, "SKEIN_BENCH_JOBS", 1000)
	rounds := testutil.EnvInt(b, "SKEIN_BENCH_ROUNDS", 5)
	for range b.N {
		b.StopTimer()
		c := startSimCluster(b, "127.0.0", 101, 3, workers, time.Hour)
		acks := runJobs(b, c, "failover", jobs)
		sims := c.sims
		down0, lapses0, lost0 := sims.markedDown.Load(), sims.lapses.Load(), sims.lostRunning.Load()
		var trials []time.Duration
		// One line for all rounds: a benchmark's log is cut after ten.
		var byRound []string
		for r := range rounds {
			lead := slices.Index(c.nodes, leaderOf(b, c.nodes))
			survivor := (lead + 1) % len(c.nodes)
			via := c.client(b, survivor)
			// The first write through the survivor: its connection is
			// open before the kill, as a client's would be.
			if _, err := via.Status(context.Background()); err != nil {
				b.Fatal(err)
			}
			killed := c.nodes[lead]
			t0 := time.Now()
			if err := killed.proc.cmd.Process.Kill(); err != nil {
				b.Fatal(err)
			}
			_ = killed.proc.cmd.Wait()
			var refused []string // what the survivor answered before it took a write
			for k := 0; ; k++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := via.SubmitJob(ctx, api.SubmitRequest{RequestID: fmt.Sprintf("failover-write-%d-%d", r, k), Spec: runSpec()})
				cancel()
				if err == nil {
					break
				}
				if time.Since(t0) > 30*time.Second {
					b.Fatalf("round %d: no write accepted 30s after the leader was killed: %v", r, err)
				}
				refused = append(refused, fmt.Sprintf("%s at %s", err, time.Since(t0).Round(time.Millisecond)))
				time.Sleep(10 * time.Millisecond) // a refusal, not a held request: ask again
			}
			took := time.Since(t0)
			trials = append(trials, took)
			time.Sleep(time.Until(t0.Add(failoverObserve))) // what the failover cost the sims shows by then
			byRound = append(byRound, fmt.Sprintf("round %d: node-%s killed, write accepted through node-%s after %s (refused before: %q), so far %d sims marked down, %d leases lapsed, %d allocations lost",
				r, killed.ip, c.nodes[survivor].ip, took.Round(time.Millisecond), refused,
				sims.markedDown.Load()-down0, sims.lapses.Load()-lapses0, sims.lostRunning.Load()-lost0))

			killed.startWith(b, c.flags, c.nodes[survivor].gossip())
			back := c.client(b, lead)
			testutil.WaitFor(b, 2*time.Minute, func() error { return allReady(back, workers+len(c.nodes)) })
			time.Sleep(3 * time.Second) // settle: the sims' watches of it open again
		}
		down, lapses, lost := sims.markedDown.Load()-down0, sims.lapses.Load()-lapses0, sims.lostRunning.Load()-lost0
		reruns := rerunJobs(b, sims.ledger, acks, nil)
		b.Logf("%d workers, %d jobs, %d rounds: %s", workers, jobs, rounds, strings.Join(byRound, "; "))
		reportTrials(b, "failover", trials)
		b.ReportMetric(float64(down), "workers-marked-down")
		b.ReportMetric(float64(lapses), "lease-lapses")
		b.ReportMetric(float64(lost), "allocs-lost-running")
		b.ReportMetric(float64(reruns), "jobs-run-again")
		if down+lapses+lost+int64(reruns) > 0 {
			b.Errorf("over %d failovers: %d sims marked down, %d leases lapsed, %d allocations ended under a running sim, %d jobs run again",
				rounds, down, lapses, lost, reruns)
		}
	}
}

// BenchmarkWorkerNodeLoss measures B4 at many workers:
// SKEIN_BENCH_SERVERS real server agent processes (3 voters, default, or
// 1) and SKEIN_BENCH_WORKERS simulated workers (default 1,000) running
// SKEIN_BENCH_JOBS jobs (default 1,000, one GPU each, one restart
// allowed, that run for an hour). Each of SKEIN_BENCH_ROUNDS rounds
// (default 10) cuts SKEIN_BENCH_VICTIMS sims running jobs (default 1;
// none of their jobs one already run again, whose restart is spent) off
// at once, as machines that died (simWorkers.cutOff): the figure is
// the time from the cut to every job they ran having its replacement
// reported running by another sim, as the leader acknowledged it (the
// sims' ledger), p50 and p99 over the rounds. It checks that the loss
// cost nobody else: no other sim marked down, no other sim's lease
// lapsed, no allocation ended under a running sim, no other job run
// again; and it reports the leader changes the servers counted
// meanwhile. -benchtime 1x.
func BenchmarkWorkerNodeLoss(b *testing.B) {
	workers := testutil.EnvInt(b, "SKEIN_BENCH_WORKERS", 1000)
	jobs := testutil.EnvInt(b, "SKEIN_BENCH_JOBS", 1000)
	rounds := testutil.EnvInt(b, "SKEIN_BENCH_ROUNDS", 10)
	victims := testutil.EnvInt(b, "SKEIN_BENCH_VICTIMS", 1)
	servers := testutil.EnvInt(b, "SKEIN_BENCH_SERVERS", 3)
	if servers != 1 && servers != 3 {
		b.Fatalf("SKEIN_BENCH_SERVERS=%d: want 1 or 3", servers)
	}
	for range b.N {
		b.StopTimer()
		c := startSimCluster(b, "127.0.0", 111, servers, workers, time.Hour)
		acks := runJobs(b, c, "nodeloss", jobs)
		sims := c.sims
		before := scrapeServers(b, c.addrs, c.token)
		down0, lapses0, lost0 := sims.markedDown.Load(), sims.lapses.Load(), sims.lostRunning.Load()
		cut := map[string]bool{}
		var trials []time.Duration
		var byRound []string // one line for all: a benchmark's log is cut after ten
		for r := range rounds {
			// The victims: sims not cut yet that run jobs, none of them
			// a job run again already (each has one restart, which its
			// victim's loss takes), picked at random, and the jobs each
			// runs now.
			runs := map[string][]string{}
			rerun := map[string]bool{}
			for _, a := range acks {
				if j := sims.ledger.job(a.id); j != nil && len(j.runs[0]) > 0 {
					on := j.runs[0][len(j.runs[0])-1]
					runs[on] = append(runs[on], a.id)
					rerun[on] = rerun[on] || len(j.runs[0]) > 1
				}
			}
			var candidates []string
			for id := range runs {
				if !cut[id] && !rerun[id] {
					candidates = append(candidates, id)
				}
			}
			if len(candidates) < victims {
				b.Fatalf("round %d: %d sims run jobs, none run again yet, and are not cut off yet, want %d", r, len(candidates), victims)
			}
			slices.Sort(candidates)
			rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
			gone := candidates[:victims]
			var theirs []string
			for _, id := range gone {
				cut[id] = true
				theirs = append(theirs, runs[id]...)
			}
			t0 := time.Now()
			for _, id := range gone {
				sims.cutOff(simIndex(b, id))
			}
			testutil.WaitFor(b, time.Minute, func() error {
				for _, id := range theirs {
					j := sims.ledger.job(id)
					if on := j.runs[0][len(j.runs[0])-1]; cut[on] {
						return fmt.Errorf("job %s still runs on %s only", structs.ShortID(id), on)
					}
				}
				return nil
			})
			took := time.Since(t0)
			trials = append(trials, took)
			byRound = append(byRound, fmt.Sprintf("round %d: %s cut off, its %d jobs running elsewhere after %s", r, strings.Join(gone, ", "), len(theirs), took.Round(time.Millisecond)))
			time.Sleep(time.Second) // between losses, as apart as machines die
		}
		after := scrapeServers(b, c.addrs, c.token)
		// Each victim's own lease lapses once, which its death is; its
		// views stop, so it counts nothing else.
		var lapses int64
		testutil.WaitFor(b, 10*time.Second, func() error {
			if lapses = sims.lapses.Load() - lapses0; lapses < int64(len(cut)) {
				return fmt.Errorf("%d leases lapsed, want one for each of the %d sims cut off", lapses, len(cut))
			}
			return nil
		})
		others := lapses - int64(len(cut))
		down, lost := sims.markedDown.Load()-down0, sims.lostRunning.Load()-lost0
		reruns := rerunJobs(b, sims.ledger, acks, cut)
		b.Logf("%d servers, %d workers, %d jobs, %d rounds of %d: %s", servers, workers, jobs, rounds, victims, strings.Join(byRound, "; "))
		reportTrials(b, "recovery", trials)
		b.ReportMetric(after.leaderChanges-before.leaderChanges, "leader-changes")
		b.ReportMetric(float64(down), "others-marked-down")
		b.ReportMetric(float64(others), "others-lease-lapses")
		b.ReportMetric(float64(lost), "allocs-lost-running")
		b.ReportMetric(float64(reruns), "others-run-again")
		if down+others+lost+int64(reruns) > 0 {
			b.Errorf("over %d losses: %d other sims marked down, %d other leases lapsed, %d allocations ended under a running sim, %d other jobs run again",
				len(cut), down, others, lost, reruns)
		}
	}
}

// reportTrials reports the p50, p99 and largest of trials (sorting them)
// as what-p50-ms and so on.
func reportTrials(b *testing.B, what string, trials []time.Duration) {
	slices.Sort(trials)
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p99", 0.99}, {"max", 1}} {
		b.ReportMetric(float64(testutil.Percentile(trials, q.q))/float64(time.Millisecond), what+"-"+q.name+"-ms")
	}
}

// runSpec is a job of the failover and node-loss benchmarks: one GPU of
// a sim, one restart allowed.
func runSpec() structs.JobSpec {
	return structs.JobSpec{Command: []string{"true"}, Nodes: 1, GPUs: 1, Restarts: 1, Constraints: map[string]string{"bench": "1"}}
}

// runJobs submits jobs jobs (runSpec) through the cluster's leader from 8
// clients and waits until the sims report every one running; it returns
// the leader's answers.
func runJobs(b *testing.B, c *simCluster, prefix string, jobs int) []burstAck {
	b.Helper()
	acks, _, err := submitAll(simClients(b, 8, c.addrs, c.token), c.sims, prefix, jobs,
		func(int) structs.JobSpec { return runSpec() }, time.Now().Add(5*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, 5*time.Minute, func() error {
		for _, a := range acks {
			if a.id == "" {
				return fmt.Errorf("a job was not submitted in time")
			}
			if j := c.sims.ledger.job(a.id); j == nil || len(j.runs[0]) == 0 {
				return fmt.Errorf("job %s not reported running yet", structs.ShortID(a.id))
			}
		}
		return nil
	})
	return acks
}

// rerunJobs counts the jobs of acks the sims ran more than once where
// only a node in lost may have run one before another did: a job's run on
// a node cut off is replaced, anything else run again is a job run twice.
func rerunJobs(b *testing.B, ledger *simLedger, acks []burstAck, lost map[string]bool) int {
	b.Helper()
	n := 0
	for _, a := range acks {
		runs := ledger.job(a.id).runs[0]
		for _, on := range runs[:len(runs)-1] {
			if !lost[on] {
				n++
				if n <= 5 {
					b.Logf("job %s run again: on %v", a.id, runs)
				}
				break
			}
		}
	}
	return n
}

// simIndex is the index of the sim named id (sim-NNNNN).
func simIndex(b *testing.B, id string) int {
	b.Helper()
	var i int
	if _, err := fmt.Sscanf(id, "sim-%d", &i); err != nil {
		b.Fatalf("sim name %q: %v", id, err)
	}
	return i
}
