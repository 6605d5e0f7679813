package agent

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// benchAgent starts an idle one-node agent with test timings, stopped when
// the benchmark ends, and a client for it.
func benchAgent(b *testing.B) (*Agent, *api.Client) {
	return startBenchAgent(b, testConfig(b, b.TempDir()))
}

// startBenchAgent starts an agent with cfg, shut down when the benchmark
// ends (or earlier by the benchmark), and a client for it.
func startBenchAgent(b *testing.B, cfg Config) (*Agent, *api.Client) {
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(a.Shutdown)
	return a, clientFor(b, a, cfg.Token)
}

// securities are the two ways a cluster runs, for benchmarks that compare
// them: plaintext, and secure (mutual TLS, encrypted gossip).
var securities = []struct {
	name string
	mode Security
}{{"plain", SecurityAuto}, {"tls", SecurityTLS}}

// BenchmarkSubmitToRunning measures, on an idle one-node agent, the time from
// a client's submit call to (a) the job's process being started by its
// supervisor and (b) the allocation being committed as running, which is
// what `skein job` shows. One job per iteration, each finished before the
// next is submitted; run with -benchtime 200x for p99 over 200 jobs.
func BenchmarkSubmitToRunning(b *testing.B) {
	for _, sec := range securities {
		b.Run(sec.name, func(b *testing.B) {
			cfg := testConfig(b, b.TempDir())
			cfg.Security, cfg.Token = sec.mode, clusterToken
			a, c := startBenchAgent(b, cfg)
			benchSubmitToRunning(b, a, c)
		})
	}
}

// BenchmarkSubmitToRunningACL is BenchmarkSubmitToRunning on a one-node
// agent running as root, so that every job runs as another user, without
// ACLs ("off": the cluster's API token, jobs as the job user nobody) and
// with them ("acl": bootstrapped, a submitter's token checked against the
// replicated state on every call, the owner stamped, every write
// audit-logged, and the job run as the owner's local account, a user made
// for the benchmark). Run both in one process for the ratio.
func BenchmarkSubmitToRunningACL(b *testing.B) {
	for _, mode := range []string{"off", "acl"} {
		b.Run(mode, func(b *testing.B) {
			cfg := testConfig(b, b.TempDir())
			cfg.Token = clusterToken
			a, c := startBenchAgent(b, cfg)
			if mode == "acl" {
				u := testutil.LocalUser(b)
				boot, err := c.ACLBootstrap(context.Background(), api.ACLBootstrapRequest{})
				if err != nil {
					b.Fatal(err)
				}
				tok, err := clientFor(b, a, boot.Token).CreateACLToken(context.Background(), api.ACLTokenCreateRequest{User: u.Name, Role: structs.RoleSubmitter})
				if err != nil {
					b.Fatal(err)
				}
				c = clientFor(b, a, tok.Token)
			}
			benchSubmitToRunning(b, a, c)
		})
	}
}

// BenchmarkSubmitToRunningCluster is BenchmarkSubmitToRunning on an idle
// 3-node cluster with production timings, submitting through a node that
// does not lead: the submission is forwarded to the leader, every commit
// is replicated, and the job may run on any node, so every hop between
// nodes is taken (over mutual TLS in the tls case). The figures are read
// on the node submitted to, once it has applied them.
func BenchmarkSubmitToRunningCluster(b *testing.B) {
	for _, sec := range securities {
		b.Run(sec.name, func(b *testing.B) {
			tc := benchCluster(b, 3, sec.mode)
			lead := -1
			for i, a := range tc.agents {
				if a.raft.IsLeader() {
					lead = i
				}
			}
			follower := tc.agents[(lead+1)%3]
			benchSubmitToRunning(b, follower, tc.client(follower))
		})
	}
}

func benchSubmitToRunning(b *testing.B, a *Agent, c *api.Client) {
	benchSubmitSpecToRunning(b, a, c, structs.JobSpec{Command: []string{"true"}, GPUs: 1})
}

// benchSubmitSpecToRunning submits spec b.N times, one at a time, and
// reports submit -> started (the node's start time) and submit -> running
// (the start committed).
func benchSubmitSpecToRunning(b *testing.B, a *Agent, c *api.Client, spec structs.JobSpec) {
	ctx := context.Background()
	started := make([]time.Duration, 0, b.N)
	committed := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		job, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: spec.Copy()})
		if err != nil {
			b.Fatal(err)
		}
		alloc := waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return al.State != structs.AllocPending })
		if alloc.State != structs.AllocRunning && alloc.State != structs.AllocSucceeded {
			b.Fatalf("job %s: allocation %s (%s)", structs.ShortID(job.ID), alloc.State, alloc.Reason)
		}
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
	ms := func(q float64) float64 {
		return float64(testutil.Percentile(d, q)) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.50), what+"-p50-ms")
	b.ReportMetric(ms(0.99), what+"-p99-ms")
}

// benchCluster starts an n-node cluster with production timings (only the
// ports and data dirs are the tests'), for the failover and throughput
// benchmarks; sec is SecurityTLS for a secure cluster, and each of with
// changes every node's config.
func benchCluster(b *testing.B, n int, sec Security, with ...func(*Config)) *testCluster {
	tc := &testCluster{t: b, net: &cluster.Partitioner{}}
	for i := range n {
		cfg := testConfig(b, b.TempDir())
		cfg.Name = fmt.Sprintf("node%d", i)
		cfg.RaftPort, cfg.GossipPort = -1, -1
		cfg.Network = tc.net
		cfg.Token = clusterToken
		cfg.Timing = cluster.Timing{} // production Raft timings
		cfg.Security = sec
		for _, f := range with {
			f(&cfg)
		}
		if i > 0 {
			cfg.Join = []string{tc.agents[i-1].raft.GossipAddr()}
			if sec == SecurityTLS {
				cfg.Join = append(cfg.Join, tc.agents[i-1].HTTPAddr())
				cfg.JoinToken = tc.joinToken(api.JoinTokenCreateRequest{})
			}
		}
		a, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		tc.agents = append(tc.agents, a)
	}
	b.Cleanup(func() {
		for _, a := range tc.live() {
			a.Shutdown()
		}
	})
	testutil.WaitFor(b, 60*time.Second, func() error {
		lead := -1
		for i, a := range tc.agents {
			if a.raft.IsLeader() {
				lead = i
			}
		}
		if lead < 0 {
			return fmt.Errorf("no leader")
		}
		if len(tc.agents[lead].fsm.Nodes()) != n {
			return fmt.Errorf("%d nodes", len(tc.agents[lead].fsm.Nodes()))
		}
		return nil
	})
	// Every server, not only the leader: one whose promotion the leader
	// had appended but not yet sent refuses to vote, and a benchmark
	// that then kills the leader leaves the rest a vote short for good.
	tc.waitVoters(min(n, 3))
	return tc
}

// BenchmarkLeaderFailover measures B2: the leader's node is stopped (its
// Raft and API go away without a leadership transfer), and a client keeps
// submitting through a surviving node; the figure is the time from the stop
// to the first submission acknowledged (committed) after it. One fresh
// cluster per iteration; -benchtime 20x gives 20 trials.
func BenchmarkLeaderFailover(b *testing.B) {
	for _, sec := range securities {
		for _, n := range []int{3, 5} {
			b.Run(fmt.Sprintf("%s/nodes=%d", sec.name, n), func(b *testing.B) { benchLeaderFailover(b, n, sec.mode, (*testCluster).kill) })
		}
	}
}

// BenchmarkLeaderLost measures B2 for a silent machine: the leader's node
// is cut off from every other (Raft, gossip and API: its machine gone, or
// its network), and a client keeps submitting through a surviving node;
// the figure is the time from the cut to the first submission
// acknowledged after it.
func BenchmarkLeaderLost(b *testing.B) {
	for _, n := range []int{3, 5} {
		b.Run(fmt.Sprintf("plain/nodes=%d", n), func(b *testing.B) { benchLeaderFailover(b, n, SecurityAuto, (*testCluster).isolate) })
	}
}

// benchLeaderFailover times the failover after lose(tc, leader).
func benchLeaderFailover(b *testing.B, n int, sec Security, lose func(*testCluster, int)) {
	var trials []time.Duration
	for range b.N {
		b.StopTimer()
		tc := benchCluster(b, n, sec)
		lead := -1
		for i, a := range tc.agents {
			if a.raft.IsLeader() {
				lead = i
			}
		}
		survivor := tc.agents[(lead+1)%n]
		c := tc.client(survivor)
		b.StartTimer()
		t0 := time.Now()
		lose(tc, lead)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(), Spec: structs.JobSpec{Command: []string{"true"}}})
			cancel()
			if err == nil {
				break
			}
			if time.Since(t0) > 30*time.Second {
				b.Fatalf("no write accepted 30s after the leader stopped: %v", err)
			}
		}
		trials = append(trials, time.Since(t0))
		b.StopTimer()
		for _, a := range tc.live() {
			a.Shutdown()
		}
	}
	report(b, "failover", trials)
}

// BenchmarkNodeLossRecovery measures B4: a worker running a job (with a
// restart allowed) is cut off from the cluster without a word, as a dead or
// frozen machine would be; the figure is the time from the cut to the job's
// replacement allocation running on another node. Production liveness
// timings (stop-after 2.5s, down-after 3.5s). -benchtime 10x gives 10 trials.
func BenchmarkNodeLossRecovery(b *testing.B) {
	for _, sec := range securities {
		b.Run(sec.name, func(b *testing.B) {
			benchNodeLossRecovery(b, sec.mode, structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1, Restarts: 1})
		})
	}
}

// BenchmarkNodeLossRecoveryImage is BenchmarkNodeLossRecovery (plaintext)
// with the job in a container image every node holds: the cut-off node's
// supervisor stops the container when its lease runs out, and the
// replacement starts a container of its own.
func BenchmarkNodeLossRecoveryImage(b *testing.B) {
	image := testutil.BusyboxImage(b)
	benchNodeLossRecovery(b, SecurityAuto,
		structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1, Restarts: 1, Image: image},
		func(cfg *Config) { cfg.ContainerSocket = DefaultContainerSocket })
}

func benchNodeLossRecovery(b *testing.B, sec Security, spec structs.JobSpec, with ...func(*Config)) {
	var trials []time.Duration
	for range b.N {
		b.StopTimer()
		tc := benchCluster(b, 3, sec, with...)
		lead := -1
		for i, a := range tc.agents {
			if a.raft.IsLeader() {
				lead = i
			}
		}
		leader := tc.agents[lead]
		c := tc.client(leader)
		// Keep the leader's own GPUs busy so the job lands on a worker.
		var job *structs.Job
		for {
			j, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: spec.Copy()})
			if err != nil {
				b.Fatal(err)
			}
			var alloc *structs.Allocation
			testutil.WaitFor(b, 20*time.Second, func() error {
				if as := leader.fsm.Allocs(j.ID); len(as) > 0 && as[0].State == structs.AllocRunning {
					alloc = as[0]
					return nil
				}
				return fmt.Errorf("job %s not running", structs.ShortID(j.ID))
			})
			if alloc.NodeID != leader.nodeID {
				job = j
				break
			}
		}
		victim := tc.indexOf(leader.fsm.Allocs(job.ID)[0].NodeID)
		b.StartTimer()
		t0 := time.Now()
		tc.isolate(victim)
		testutil.WaitFor(b, 60*time.Second, func() error {
			for _, al := range leader.fsm.Allocs(job.ID) {
				if al.Attempt == 2 && al.State == structs.AllocRunning {
					return nil
				}
			}
			return fmt.Errorf("no replacement running yet")
		})
		trials = append(trials, time.Since(t0))
		b.StopTimer()
		tc.net.Heal()
		for _, a := range tc.live() {
			a.Shutdown()
		}
	}
	report(b, "recovery", trials)
}

// BenchmarkGPUFaultToRestarted measures, on an idle one-node agent with 4
// simulated GPUs, the time from a fatal fault injected into the GPU of a
// running job to (a) the fault being committed (the GPU is out of service)
// and (b) the job's next attempt committed as running on another GPU. Each
// iteration uncordons the GPU and cancels the job before the next.
func BenchmarkGPUFaultToRestarted(b *testing.B) {
	a, c := benchAgent(b)
	ctx := context.Background()
	faulted := make([]time.Duration, 0, b.N)
	restarted := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		job, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1}})
		if err != nil {
			b.Fatal(err)
		}
		first := waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return al.State == structs.AllocRunning })
		var index int
		n, _ := a.fsm.Node(a.NodeID())
		for _, g := range n.GPUs {
			if g.UUID == first.GPUs[0] {
				index = g.Index
			}
		}
		b.StartTimer()
		t0 := time.Now()
		if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: a.Name(), Index: index, Reason: "XID 79"}); err != nil {
			b.Fatal(err)
		}
		waitAlloc(b, a, job.ID, func(al *structs.Allocation) bool { return al.GPUFault != "" })
		faulted = append(faulted, time.Since(t0))
		waitJobRunning(b, a, job.ID, 2)
		restarted = append(restarted, time.Since(t0))
		b.StopTimer()
		if _, err := c.CordonGPU(ctx, api.GPURequest{Node: a.Name(), Index: index}, false); err != nil {
			b.Fatal(err)
		}
		if _, err := c.CancelJob(ctx, job.ID); err != nil {
			b.Fatal(err)
		}
		testutil.WaitFor(b, 30*time.Second, func() error {
			if j, _ := a.fsm.Job(job.ID); !j.State.Terminal() {
				return fmt.Errorf("job %s", j.State)
			}
			return nil
		})
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "fault-committed", faulted)
	report(b, "restarted", restarted)
}

// waitJobRunning blocks until the job's attempt is committed as running.
func waitJobRunning(b *testing.B, a *Agent, jobID string, attempt int) {
	deadline := time.After(30 * time.Second)
	for {
		_, changed := a.fsm.Watch()
		for _, al := range a.fsm.Allocs(jobID) {
			if al.Attempt == attempt && al.State == structs.AllocRunning {
				return
			}
		}
		select {
		case <-changed:
		case <-deadline:
			b.Fatalf("job %s: attempt %d not running in 30s", structs.ShortID(jobID), attempt)
		}
	}
}
