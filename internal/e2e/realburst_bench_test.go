package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// startRealAgents starts agents real agent processes on the loopback
// addresses prefix.first, prefix.first+1 and so on, with the agent flags
// given, the first founding the cluster and the others joining it, and
// waits until every one is ready; it returns them and an admin client of
// the first.
func startRealAgents(b *testing.B, prefix string, first, agents int, flags []string) ([]*node, *api.Client) {
	b.Helper()
	ips := make([]string, agents)
	for i := range ips {
		ips[i] = fmt.Sprintf("%s.%d", prefix, first+i)
	}
	nodes := newNodes(b, ips...)
	nodes[0].startWith(b, flags)
	for _, n := range nodes[1:] {
		n.startWith(b, flags, nodes[0].gossip())
	}
	admin, err := api.NewClient(nodes[0].proc.addr, adminToken(b))
	if err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, 2*time.Minute, func() error { return allReady(admin, agents) })
	return nodes, admin
}

// stopRealAgents interrupts every agent and waits for each to exit.
func stopRealAgents(nodes []*node) {
	for _, n := range nodes {
		_ = n.proc.cmd.Process.Signal(os.Interrupt)
	}
	for _, n := range nodes {
		_ = n.proc.cmd.Wait()
	}
}

// BenchmarkRealAgentsBurst is the burst of real agent processes of
// docs/benchmarks-history.md, "Scale — the 60-agent burst of real processes":
// SKEIN_BENCH_AGENTS agents (default 60) on loopback, 4 simulated GPUs
// each, with the agent's default servers (three voters and two standbys;
// SKEIN_BENCH_STANDBYS=-1 makes every agent a server; SKEIN_BENCH_FLAGS
// adds agent flags, space-separated, for trials); once every node is
// ready and after 5 s to settle, 8 clients submit SKEIN_BENCH_JOBS jobs
// (default 500) of one GPU running `sleep 1`, each to an agent of its own
// picking, as users do, and the benchmark waits for all to end (within
// burstDeadline). It reports the time from the first submission to the
// last job ended, the leader changes (skein_raft_leader_changes_total,
// summed over the servers, each of which counts every change), and, from
// the events, the nodes marked down and those whose allocations were
// declared lost meanwhile: no node died, so each such loss killed healthy
// jobs. Then it checks that every job succeeded at its first attempt (a
// job restarted lost its first one).
// All agents share the machine's cores. -benchtime 1x.
func BenchmarkRealAgentsBurst(b *testing.B) {
	agents := testutil.EnvInt(b, "SKEIN_BENCH_AGENTS", 60)
	jobs := testutil.EnvInt(b, "SKEIN_BENCH_JOBS", 500)
	if agents > 254 {
		b.Fatalf("SKEIN_BENCH_AGENTS=%d: want at most 254 (one loopback address each)", agents)
	}
	var flags []string
	if s := os.Getenv("SKEIN_BENCH_STANDBYS"); s != "" {
		flags = []string{"--standbys", s}
	}
	flags = append(flags, strings.Fields(os.Getenv("SKEIN_BENCH_FLAGS"))...)
	const clients = 8
	for range b.N {
		b.StopTimer()
		nodes, admin := startRealAgents(b, "127.0.2", 1, agents, flags)
		time.Sleep(5 * time.Second) // settle: promotions, registrations
		token := adminToken(b)
		addrs := make([]string, len(nodes))
		cls := make([]*api.Client, len(nodes))
		for i, n := range nodes {
			addrs[i] = n.proc.addr
			c, err := api.NewClient(n.proc.addr, token)
			if err != nil {
				b.Fatal(err)
			}
			cls[i] = c.WithBusyRetry(api.DefaultBusyWait, nil)
		}
		ctx := context.Background()
		begin, err := admin.Events(ctx, api.EventsQuery{Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		before := scrapeServers(b, addrs, token)

		b.StartTimer()
		start := time.Now()
		ids := make([]string, jobs)
		work := make(chan int)
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					req := api.SubmitRequest{RequestID: fmt.Sprintf("real-burst-%05d", i),
						Spec: structs.JobSpec{Command: []string{"sleep", "1"}, Nodes: 1, GPUs: 1}}
					// The same request ID again through another agent
					// when the one asked does not answer: never two jobs.
					var job *structs.Job
					var err error
					for try := 0; try < 5; try++ {
						if job, err = cls[rand.N(len(cls))].SubmitJob(ctx, req); err == nil {
							break
						}
						time.Sleep(200 * time.Millisecond)
					}
					if err != nil {
						select {
						case errs <- fmt.Errorf("submit %d: %w", i, err):
						default:
						}
						continue
					}
					ids[i] = job.ID
				}
			}()
		}
		for i := range jobs {
			work <- i
		}
		close(work)
		wg.Wait()
		submitted := time.Since(start)
		close(errs)
		for err := range errs {
			b.Error(err)
		}
		// Only the jobs submitted can end: one whose submission failed
		// (reported above) is not waited for until the deadline.
		var submittedIDs []string
		for _, id := range ids {
			if id != "" {
				submittedIDs = append(submittedIDs, id)
			}
		}
		var ended map[string]structs.Job
		deadline := start.Add(burstDeadline)
		for {
			ended = endedJobs(b, admin)
			if allIn(ended, submittedIDs) || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Second) // the jobs' end is what is waited on
		}
		took := time.Since(start)
		b.StopTimer()

		after := scrapeServers(b, addrs, token)
		down, lost := 0, 0
		for cursor := begin.Next; ; {
			page, err := admin.Events(ctx, api.EventsQuery{After: cursor})
			if err != nil {
				b.Fatal(err)
			}
			for _, e := range page.Events {
				switch e.Kind {
				case structs.EventNodeDown:
					down++
				case structs.EventNodeLost:
					lost++
				}
			}
			if len(page.Events) == 0 {
				break
			}
			cursor = page.Next
		}
		var unfinished, failed, restarted int
		for _, id := range ids {
			j, ok := ended[id]
			switch {
			case id == "":
			case !ok:
				unfinished++
			case j.State != structs.JobSucceeded:
				failed++
				if failed <= 5 {
					b.Logf("job %s %s: %s", structs.ShortID(id), j.State, j.Reason)
				}
			case j.Attempts != 1:
				restarted++
			}
		}
		var figures []string
		report := func(v float64, unit string) {
			b.ReportMetric(v, unit)
			figures = append(figures, fmt.Sprintf("%.4g %s", v, unit))
		}
		report(took.Seconds(), "all-done-s")
		report(float64(jobs)/submitted.Seconds(), "submissions/s")
		report(after.leaderChanges-before.leaderChanges, "leader-changes")
		report(after.busy-before.busy, "busy-429s")
		report(float64(down), "nodes-marked-down")
		report(float64(lost), "node-loss-events")
		report(float64(unfinished), "jobs-not-ended")
		report(float64(failed), "jobs-not-succeeded")
		report(float64(restarted), "jobs-restarted")
		b.Logf("%d agents (flags %v), %d jobs: %s", agents, cmp.Or(strings.Join(flags, " "), "defaults"), jobs, strings.Join(figures, ", "))
		if n := after.leaderChanges - before.leaderChanges; n > 0 {
			b.Errorf("%v leader changes during the burst", n)
		}
		if down+lost+unfinished+failed+restarted > 0 {
			b.Errorf("%d nodes marked down, %d node losses, %d jobs not ended, %d not succeeded, %d restarted", down, lost, unfinished, failed, restarted)
		}
		stopRealAgents(nodes)
	}
}

// allIn reports whether every one of ids is a key of jobs.
func allIn(jobs map[string]structs.Job, ids []string) bool {
	for _, id := range ids {
		if _, ok := jobs[id]; !ok {
			return false
		}
	}
	return true
}

// endedJobs is every job the cluster holds that has ended, by ID.
func endedJobs(b *testing.B, c *api.Client) map[string]structs.Job {
	b.Helper()
	all, err := c.Jobs(context.Background(), true)
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]structs.Job{}
	for _, j := range all {
		if j.State.Terminal() {
			out[j.ID] = j
		}
	}
	return out
}
