package node

import "time"

// sweepLoop removes, every SweepInterval, the directories of this node's
// allocations that the state no longer holds, logs included: the leader
// removes a finished job with its allocations after its retention
// (agent/leader/gc.go), and the node follows once it has applied that.
func (n *Node) sweepLoop() {
	tick := time.NewTicker(n.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		removed, err := n.runner.Sweep(n.fsm.HasAlloc, n.fsm.Index())
		if removed > 0 {
			n.log.Debug("removed the directories of allocations the state dropped", "count", removed)
		}
		if err != nil {
			n.log.Warn("remove allocation directories", "error", err)
		}
	}
}
