package agent

import (
	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/agent/metrics"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// newMetrics makes this node's metrics (agent/metrics), before Raft
// starts: Raft is to drive the state machine through them. They read
// Raft only at a scrape, which the API serves once Raft runs.
func (a *Agent) newMetrics() {
	a.metrics = metrics.New(metrics.Config{
		NodeID:     a.nodeID,
		NodeName:   a.cfg.Name,
		FSM:        a.fsm,
		HoldsState: a.holdsState,
		View:       a.view,
		Raft:       metricsRaft{a},
		Inventory:  a.inv,
		Telemetry:  a.telemetry,
		TimerLag:   a.load.Lag,
	})
}

// raftFSM is the state machine as Raft drives it: measured by the metrics.
func (a *Agent) raftFSM() raft.FSM { return a.metrics.WrapFSM(a.fsm) }

// metricsRaft is what the metrics read of this agent's Raft and gossip.
type metricsRaft struct{ a *Agent }

func (r metricsRaft) IsLeader() bool                { return r.a.raft.IsLeader() }
func (r metricsRaft) Stats() map[string]string      { return r.a.raft.Stats() }
func (r metricsRaft) Members() []cluster.Member     { return r.a.raft.Members() }
func (r metricsRaft) GossipHealth() int             { return r.a.raft.GossipHealth() }
func (r metricsRaft) Followers() []cluster.Follower { return r.a.raft.Followers() }

// reportRunning tells the metrics that one of this node's allocations
// started, for the submit-to-running latency, before the report goes to
// the leader: while the node's view still holds the allocation as pending, so
// that an allocation re-adopted after a restart is not counted again.
func (a *Agent) reportRunning(u structs.AllocUpdate) {
	if u.State != structs.AllocRunning {
		return
	}
	view := a.node.View()
	alloc, ok := view.Alloc(u.AllocID)
	if !ok || alloc.State != structs.AllocPending {
		return
	}
	if job, ok := view.Job(alloc.JobID); ok {
		a.metrics.Running(job, alloc, u.At)
	}
}
