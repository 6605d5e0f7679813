package sched

import (
	"slices"

	"github.com/skein-dev/skein/structs"
)

// statusUnresponsive is the status a ready node the leader has not heard
// from lately has for one pass. It is never committed; a blocked reason
// counts such a node as "node unresponsive".
const statusUnresponsive structs.NodeStatus = "unresponsive"

// reasonGossipUnhealthy is the health reason, for one pass, of a GPU its
// node announced unhealthy by gossip before the report committed.
const reasonGossipUnhealthy = "reported unhealthy by its node"

// overlaid is a State whose nodes carry what the leader knows ahead of the
// committed state.
type overlaid struct {
	State
	nodes []*structs.Node
}

func (o overlaid) AllNodes() []*structs.Node { return o.nodes }

// overlay returns s with the silent ready nodes unresponsive and the GPUs
// in the gossip masks unhealthy, and whether any node is silent. Both only
// keep work off: the FSM re-checks every plan on committed state anyway.
// Changed nodes are copies; s and its nodes are never written, and s
// itself is returned when nothing changes.
func overlay(s State, silent map[string]bool, masks map[string]uint64) (State, bool) {
	if len(silent) == 0 && len(masks) == 0 {
		return s, false
	}
	nodes := s.AllNodes()
	var out []*structs.Node // a copy of nodes from the first change on
	anySilent := false
	for i, n := range nodes {
		if n == nil {
			continue
		}
		quiet := silent[n.ID] && n.Status == structs.NodeReady
		mask := masks[n.ID]
		if !quiet && !anyMasked(n.GPUs, mask) {
			continue
		}
		c := n.Copy()
		if quiet {
			c.Status = statusUnresponsive
			anySilent = true
		}
		for k := range c.GPUs {
			if g := &c.GPUs[k]; masked(g, mask) {
				g.Healthy, g.Reason = false, reasonGossipUnhealthy
			}
		}
		if out == nil {
			out = slices.Clone(nodes)
		}
		out[i] = c
	}
	if out == nil {
		return s, false
	}
	return overlaid{State: s, nodes: out}, anySilent
}

// anyMasked reports whether any of gpus is masked.
func anyMasked(gpus []structs.GPU, mask uint64) bool {
	for i := range gpus {
		if masked(&gpus[i], mask) {
			return true
		}
	}
	return false
}

// masked reports whether a GPU the state holds healthy is in its node's
// gossip mask.
func masked(g *structs.GPU, mask uint64) bool {
	return g.Healthy && g.Index >= 0 && g.Index < 64 && mask&(1<<g.Index) != 0
}
