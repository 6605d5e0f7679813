package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
)

// The descriptors of the gauges a scrape reads from Raft and gossip.
var (
	isLeaderDesc    = prometheus.NewDesc("skein_raft_is_leader", "1 while this node is the Raft leader, else 0.", nil, nil)
	termDesc        = prometheus.NewDesc("skein_raft_term", "This node's current Raft term.", nil, nil)
	commitIdxDesc   = prometheus.NewDesc("skein_raft_commit_index", "Index of the last Raft entry this node knows committed.", nil, nil)
	appliedIdxDesc  = prometheus.NewDesc("skein_raft_applied_index", "Index of the last Raft entry applied to this node's state.", nil, nil)
	lastLogIdxDesc  = prometheus.NewDesc("skein_raft_last_log_index", "Index of the last entry in this node's Raft log.", nil, nil)
	snapIdxDesc     = prometheus.NewDesc("skein_raft_last_snapshot_index", "Raft index of this node's last snapshot.", nil, nil)
	peersDesc       = prometheus.NewDesc("skein_raft_peers", "Other voters in the Raft configuration, as this node knows it.", nil, nil)
	lastContactDesc = prometheus.NewDesc("skein_raft_last_contact_seconds",
		"Time since this node last heard from the leader; 0 on the leader, absent before the first contact.", nil, nil)
	membersDesc         = prometheus.NewDesc("skein_gossip_members", "Gossip members this node knows, by status.", []string{"status"}, nil)
	followerContactDesc = prometheus.NewDesc("skein_raft_follower_last_contact_seconds",
		"On the leader, each other server's time since it last heard from the leader, as it last reported it.", []string{"peer"}, nil)
	followerLagDesc = prometheus.NewDesc("skein_raft_follower_lag_entries",
		"On the leader, how many entries each other server's log was behind the leader's when it last reported.", []string{"peer"}, nil)
	followerHealthyDesc = prometheus.NewDesc("skein_raft_follower_healthy",
		"On the leader, 1 for each other server autopilot finds healthy, else 0.", []string{"peer"}, nil)
	healthDesc = prometheus.NewDesc("skein_gossip_health_score",
		"memberlist's awareness score: 0 while this node's probes are answered in time, higher (up to 8) as they are not.", nil, nil)
)

// raftCollector reads Raft's counters and gossip's members at a scrape;
// Raft's only on a node in the Raft configuration (holds), as a
// worker's Raft takes part in nothing.
type raftCollector struct {
	raft Raft
	// fsm names the followers (their nodes' names).
	fsm   *fsm.FSM
	holds func() bool
}

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{isLeaderDesc, termDesc, commitIdxDesc, appliedIdxDesc, lastLogIdxDesc,
		snapIdxDesc, peersDesc, lastContactDesc, followerContactDesc, followerLagDesc, followerHealthyDesc, membersDesc, healthDesc} {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if c.holds() {
		c.collectRaft(gauge)
	}
	counts := map[cluster.MemberStatus]int{}
	for _, m := range c.raft.Members() {
		counts[m.Status]++
	}
	for _, st := range []cluster.MemberStatus{cluster.StatusAlive, cluster.StatusFailed, cluster.StatusLeft, cluster.StatusRevoked} {
		gauge(membersDesc, float64(counts[st]), st.String())
	}
	gauge(healthDesc, float64(c.raft.GossipHealth()))
}

// collectRaft sends Raft's gauges through gauge.
func (c *raftCollector) collectRaft(gauge func(d *prometheus.Desc, v float64, labels ...string)) {
	leader := 0.0
	if c.raft.IsLeader() {
		leader = 1
	}
	gauge(isLeaderDesc, leader)
	stats := c.raft.Stats()
	for _, s := range []struct {
		desc *prometheus.Desc
		key  string
	}{{termDesc, "term"}, {commitIdxDesc, "commit_index"}, {appliedIdxDesc, "applied_index"},
		{lastLogIdxDesc, "last_log_index"}, {snapIdxDesc, "last_snapshot_index"}, {peersDesc, "num_peers"}} {
		if v, err := strconv.ParseUint(stats[s.key], 10, 64); err == nil {
			gauge(s.desc, float64(v))
		}
	}
	// raft reports "never" before the first contact, "0" on the leader,
	// else a duration.
	if d, err := time.ParseDuration(stats["last_contact"]); err == nil {
		gauge(lastContactDesc, d.Seconds())
	}
	lastIndex, _ := strconv.ParseUint(stats["last_log_index"], 10, 64)
	for _, f := range c.raft.Followers() {
		peer := f.ID
		if n, ok := c.fsm.Node(f.ID); ok {
			peer = n.Name
		}
		if f.LastContact >= 0 {
			gauge(followerContactDesc, f.LastContact.Seconds(), peer)
		}
		if f.LastIndex <= lastIndex {
			gauge(followerLagDesc, float64(lastIndex-f.LastIndex), peer)
		}
		gauge(followerHealthyDesc, boolValue(f.Healthy), peer)
	}
}
