package node

import (
	"context"
	"time"

	"github.com/skein-dev/skein/fsm"
)

// containerSweepTimeout bounds one pass over the container engine's
// containers, so a silent engine holds up no sweep for long.
const containerSweepTimeout = 30 * time.Second

// sweepLoop removes, every SweepInterval, the directories of this node's
// allocations that the state no longer holds, logs included: the leader
// removes a finished job with its allocations after its retention
// (agent/leader/gc.go), and the node follows once it has applied that.
// At start and at every sweep it also removes the containers no
// supervisor looks after any more: found at start (the node died with
// them running) or left by a killed supervisor.
func (n *Node) sweepLoop() {
	tick := time.NewTicker(n.cfg.SweepInterval)
	defer tick.Stop()
	for {
		n.sweepContainers()
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		applied := n.view.Index()
		removed, err := n.runner.Sweep(heldSince(n.view, applied), applied)
		if removed > 0 {
			n.log.Debug("removed the directories of allocations the state dropped", "count", removed)
		}
		if err != nil {
			n.log.Warn("remove allocation directories", "error", err)
		}
	}
}

// sweepContainers removes the containers of allocations that are over or
// have no supervisor (runner.CleanContainers).
func (n *Node) sweepContainers() {
	ctx, cancel := context.WithTimeout(n.ctx, containerSweepTimeout)
	defer cancel()
	removed, err := n.runner.CleanContainers(ctx)
	if removed > 0 {
		n.log.Warn("removed containers no supervisor looked after", "count", removed)
	}
	if err != nil && n.ctx.Err() == nil {
		n.log.Warn("remove stray containers", "error", err)
	}
}

// heldSince is the runner's Sweep's question, whether the state still
// holds an allocation, asked of view, which had applied applied when the
// sweep began: a view loaded since from an older state (a node that has
// become a server, its own state still replaying) does not say the state
// dropped the allocation, and it counts as held.
func heldSince(view *fsm.FSM, applied uint64) func(allocID string) bool {
	return func(id string) bool {
		_, ok, index := view.AllocAt(id)
		return ok || index < applied
	}
}
