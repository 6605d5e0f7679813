package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkIdleAgentRSS measures B6: the resident memory of each agent of
// an idle 3-node cluster of real processes, after 10 s of idling with its
// state replicated and heartbeats, gossip and Raft running.
func BenchmarkIdleAgentRSS(b *testing.B) {
	withoutACL(b) // a fresh cluster each iteration, as B6 has always measured it
	var maxMiB, sumMiB float64
	samples := 0
	for range b.N {
		nodes := newNodes(b, "127.0.0.31", "127.0.0.32", "127.0.0.33")
		nodes[0].start(b)
		nodes[1].start(b, nodes[0].gossip())
		nodes[2].start(b, nodes[1].gossip())
		waitNodes(b, nodes[0].proc, map[string]structs.NodeStatus{
			"node-127.0.0.31": "ready", "node-127.0.0.32": "ready", "node-127.0.0.33": "ready"})
		time.Sleep(10 * time.Second) // the thing measured is idling
		for _, n := range nodes {
			mib, err := testutil.RSSMiB(n.proc.cmd.Process.Pid)
			if err != nil {
				b.Fatal(err)
			}
			maxMiB = max(maxMiB, mib)
			sumMiB += mib
			samples++
			_ = n.proc.cmd.Process.Kill()
			_ = n.proc.cmd.Wait()
		}
	}
	b.ReportMetric(maxMiB, "max-rss-MiB")
	b.ReportMetric(sumMiB/float64(samples), "mean-rss-MiB")
}

// BenchmarkAbuseSubmitLatency measures the abuse test's figure: the
// latency of a real client's submits to the leader of a real 3-node
// cluster, first quiet, then under the abuse of
// TestProcess_AbuseAtTheLeader_RealClientServedAndNoLeaseLapses (10,000
// idle and keep-alive connections and slowloris clients at the same
// leader). b.N submits each, one every 20 ms, on the same cluster; run it
// with -benchtime 300x.
func BenchmarkAbuseSubmitLatency(b *testing.B) {
	ac := startAbuseCluster(b, "127.0.0.41", "127.0.0.42", "127.0.0.43")
	ac.holders(b)
	measure := func() []time.Duration {
		pace := time.NewTicker(20 * time.Millisecond)
		defer pace.Stop()
		d := make([]time.Duration, 0, b.N)
		for range b.N {
			d = append(d, ac.submitOne(b))
			<-pace.C
		}
		slices.Sort(d)
		return d
	}
	b.ResetTimer()
	quiet := measure()
	b.StopTimer()
	abuse := ac.attack()
	b.Cleanup(abuse.Stop)
	waitHeld(b, abuse)
	held := abuse.Stats()
	b.StartTimer()
	abused := measure()
	b.StopTimer()
	attack := abuse.Stats()
	abuse.Stop()
	ms := func(d []time.Duration, q float64) float64 {
		return float64(testutil.Percentile(d, q)) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(quiet, 0.50), "quiet-p50-ms")
	b.ReportMetric(ms(quiet, 0.99), "quiet-p99-ms")
	b.ReportMetric(ms(abused, 0.50), "abuse-p50-ms")
	b.ReportMetric(ms(abused, 0.99), "abuse-p99-ms")
	b.ReportMetric(ms(abused, 0.99)/ms(quiet, 0.99), "p99-abuse/quiet")
	// What the leader did to the attack while the client was measured.
	b.ReportMetric(float64(attack.Connected-held.Connected), "attack-conns")
	b.ReportMetric(float64(attack.Refused-held.Refused), "attack-refused")
}

// BenchmarkJobStartCPU measures the CPU one short job costs its node: a
// one-node agent of real processes runs b.N jobs of `true`, one at a
// time, and the benchmark reads the CPU time of the agent itself and of
// the processes it waited for (each job's supervisor, the job's own
// process included) over them, per job.
func BenchmarkJobStartCPU(b *testing.B) {
	withoutACL(b)
	n := newNodes(b, "127.0.0.36")[0]
	n.start(b)
	waitNodes(b, n.proc, map[string]structs.NodeStatus{"node-127.0.0.36": "ready"})
	pid := n.proc.cmd.Process.Pid
	read := func() (agent, children float64) {
		agent, err := testutil.CPUSeconds(pid)
		if err == nil {
			children, err = testutil.ChildrenCPUSeconds(pid)
		}
		if err != nil {
			b.Fatal(err)
		}
		return agent, children
	}
	agent0, children0 := read()
	b.ResetTimer()
	for range b.N {
		id := submitJob(b, n.proc, "--gpus", "1", "--", "true")
		n.proc.waitJob(b, id, jobIs(structs.JobSucceeded))
	}
	b.StopTimer()
	agent1, children1 := read()
	b.ReportMetric(1000*(children1-children0)/float64(b.N), "supervisor-cpu-ms/job")
	b.ReportMetric(1000*(agent1-agent0)/float64(b.N), "agent-cpu-ms/job")
}

// BenchmarkIdleSupervisorCPU measures what a running job's supervisor
// costs while its job runs: a one-node agent of real processes (4
// simulated GPUs) runs 4 jobs of `sleep`, and once they run the benchmark
// reads each supervisor process's CPU time over 20 s (a one-node
// cluster's lease never runs out, and its supervisors read it as often as
// those of a bigger cluster's, once a second). -benchtime 1x.
func BenchmarkIdleSupervisorCPU(b *testing.B) {
	withoutACL(b)
	const jobs = 4
	for range b.N {
		n := newNodes(b, "127.0.0.37")[0]
		n.start(b)
		waitNodes(b, n.proc, map[string]structs.NodeStatus{"node-127.0.0.37": "ready"})
		for range jobs {
			id := submitJob(b, n.proc, "--gpus", "1", "--", "sleep", "600")
			n.proc.waitJob(b, id, allocRunning)
		}
		sups, err := testutil.Children(n.proc.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		if len(sups) != jobs {
			b.Fatalf("%d supervisors, want %d", len(sups), jobs)
		}
		cpu := func() float64 {
			var sum float64
			for _, pid := range sups {
				s, err := testutil.CPUSeconds(pid)
				if err != nil {
					b.Fatal(err)
				}
				sum += s
			}
			return sum
		}
		cpu0, start := cpu(), time.Now()
		time.Sleep(20 * time.Second) // the thing measured is idling
		b.ReportMetric((cpu()-cpu0)/time.Since(start).Seconds()/jobs, "cores/supervisor")
		_ = n.proc.cmd.Process.Kill()
		_ = n.proc.cmd.Wait()
	}
}
