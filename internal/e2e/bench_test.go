package e2e

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkIdleAgentRSS measures B6: the resident memory of each agent of
// an idle 3-node cluster of real processes, after 10 s of idling with its
// state replicated and heartbeats, gossip and Raft running.
func BenchmarkIdleAgentRSS(b *testing.B) {
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
