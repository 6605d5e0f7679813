// Package metrics is one agent's Prometheus metrics: a registry of its
// own (several agents share a test process), the counters and histograms
// the agent's parts feed through small hooks in their configs, and
// collectors that read the replicated state, Raft, gossip and the node's
// GPUs when /metrics is scraped. A scrape takes the state machine's read
// lock for a count and nothing else: it never waits on the leader's
// scheduling, nor on a GPU (gpu.Telemetry returns its last readings).
//
// Every metric is named skein_* and documented in the table of
// docs/metrics.md; a test holds the two to each other.
package metrics
