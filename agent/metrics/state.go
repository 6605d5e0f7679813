package metrics

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// The descriptors of the gauges a scrape reads from the replicated state.
var (
	jobsDesc     = prometheus.NewDesc("skein_jobs", "Jobs in the state, by state.", []string{"state"}, nil)
	allocsDesc   = prometheus.NewDesc("skein_allocations", "Allocations in the state, by state.", []string{"state"}, nil)
	nodesDesc    = prometheus.NewDesc("skein_nodes", "Nodes in the state, by status.", []string{"status"}, nil)
	gpusDesc     = prometheus.NewDesc("skein_cluster_gpus", "GPUs of the nodes that have not left, by health state.", []string{"state"}, nil)
	gpusHeldDesc = prometheus.NewDesc("skein_cluster_gpus_allocated", "GPUs a live allocation holds.", nil, nil)
	queueDesc    = prometheus.NewDesc("skein_sched_queue_depth",
		"Queued jobs, by why they wait (a class of their reason) and priority band.", []string{"reason", "priority"}, nil)
	indexDesc = prometheus.NewDesc("skein_fsm_index", "Raft index of the last entry this node's state machine applied.", nil, nil)

	// Fair share, per account ("" for jobs outside every account); only
	// in a cluster with accounts.
	acctSharesDesc = prometheus.NewDesc("skein_account_shares", "An account's shares among its siblings.", []string{"account"}, nil)
	acctUsageDesc  = prometheus.NewDesc("skein_account_usage_gpu_seconds",
		"GPU-seconds charged to an account's users (not its sub-accounts'), decayed by the usage half-life.", []string{"account"}, nil)
	acctGPUsDesc = prometheus.NewDesc("skein_account_gpus_allocated", "GPUs the live allocations of an account's jobs hold.", []string{"account"}, nil)
	acctJobsDesc = prometheus.NewDesc("skein_account_jobs", "An account's jobs, running (holding an allocation) or queued.", []string{"account", "state"}, nil)
)

// The classes of a queued job's reason (queueReason), and the priority
// bands: every combination is reported, at 0 when empty, so that a graph
// of one never has gaps.
var (
	queueReasons  = []string{"new", "backoff", "restarting", "dependency", "array_limit", "gpu_limit", "preemption", "reservation", "resources"}
	priorityBands = []string{"low", "normal", "high"}
)

// stateCollector reads the replicated state at a scrape, on a node that
// holds it: a worker exports none of its series rather than zeros (the
// servers' are the cluster's).
type stateCollector struct {
	fsm   *fsm.FSM
	holds func() bool
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, allocsDesc, nodesDesc, gpusDesc, gpusHeldDesc, queueDesc, indexDesc,
		acctSharesDesc, acctUsageDesc, acctGPUsDesc, acctJobsDesc} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.holds() {
		return
	}
	census := c.fsm.Census()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(indexDesc, int(census.Index))
	for _, st := range structs.JobStates {
		gauge(jobsDesc, census.Jobs[st], string(st))
	}
	for _, st := range []structs.AllocState{structs.AllocPending, structs.AllocRunning, structs.AllocSucceeded,
		structs.AllocFailed, structs.AllocLost, structs.AllocKilled, structs.AllocTimedOut} {
		gauge(allocsDesc, census.Allocs[st], string(st))
	}
	for _, st := range []structs.NodeStatus{structs.NodeReady, structs.NodeDown, structs.NodeDraining, structs.NodeLeft} {
		gauge(nodesDesc, census.Nodes[st], string(st))
	}
	for _, st := range []string{structs.GPUHealthy, structs.GPUUnhealthy, structs.GPUCordoned, structs.GPUForeign} {
		gauge(gpusDesc, census.GPUs[st], st)
	}
	gauge(gpusHeldDesc, census.GPUsHeld)
	depth := map[[2]string]int{}
	nowT := time.Now()
	for _, q := range census.Queued {
		depth[[2]string{queueReason(q, nowT), priorityBand(q.Priority)}]++
	}
	for _, r := range queueReasons {
		for _, b := range priorityBands {
			gauge(queueDesc, depth[[2]string{r, b}], r, b)
		}
	}
	c.collectAccounts(ch)
}

// collectAccounts reports each account's shares, decayed usage, GPUs and
// jobs, every account of the tree at 0 when it has nothing, so a graph of
// one never has gaps.
func (c *stateCollector) collectAccounts(ch chan<- prometheus.Metric) {
	fs := c.fsm.FairShare()
	if len(fs.Accounts.Accounts) == 0 {
		return
	}
	usage := map[string]float64{}
	for _, r := range fs.Usage {
		usage[r.Account] += r.GPUSeconds
	}
	counts := c.fsm.AccountCounts()
	names := map[string]bool{}
	for name := range fs.Accounts.Accounts {
		names[name] = true
	}
	for name := range counts {
		names[name] = true
	}
	for name := range usage {
		names[name] = true
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for name := range names {
		if a := fs.Accounts.Accounts[name]; a != nil {
			gauge(acctSharesDesc, float64(a.Shares), name)
		}
		n := counts[name]
		gauge(acctUsageDesc, usage[name], name)
		gauge(acctGPUsDesc, float64(n.GPUs), name)
		gauge(acctJobsDesc, float64(n.Running), name, "running")
		gauge(acctJobsDesc, float64(n.Queued), name, "queued")
	}
}

// queueReason sorts a queued job's reason, which the scheduler writes in
// words, into a few classes: new (no pass has looked at it yet), backoff
// (its restart backoff runs), restarting (requeued, not yet looked at
// again), dependency, array_limit, gpu_limit (its owner's), preemption
// (waiting for victims, or held while another preempts), reservation
// (first in line, or kept off a node reserved for it), and resources:
// no node fits it now, whatever the filter's words.
func queueReason(q fsm.QueuedJob, now time.Time) string {
	r := q.Reason
	switch {
	case q.NotBefore.After(now):
		return "backoff"
	case r == "":
		return "new"
	case strings.HasPrefix(r, "restarting"):
		return "restarting"
	case strings.HasPrefix(r, "waiting for job "):
		return "dependency"
	case strings.HasPrefix(r, "array "):
		return "array_limit"
	case strings.Contains(r, "GPU limit"):
		return "gpu_limit"
	case strings.Contains(r, "preempt"):
		return "preemption"
	case strings.HasPrefix(r, "first in line") || strings.Contains(r, "reserved for"):
		return "reservation"
	}
	return "resources"
}

// priorityBand is low below the default priority 0, normal at it, high
// above.
func priorityBand(p int) string {
	switch {
	case p < 0:
		return "low"
	case p > 0:
		return "high"
	}
	return "normal"
}
