package fsm

import (
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/structs"
)

// NodeLiveAllocs returns copies of the allocations on a node that still
// hold resources, by creation index. Its cost follows the node's live
// allocations, not its history, so a node can call it on every applied
// entry (the local loop, the gossip metadata).
func (f *FSM) NodeLiveAllocs(nodeID string) []*structs.Allocation {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return copyAllocs(sortedAllocs(f.st.nodeLive[nodeID]))
}

// NodeLiveness is what the leader's node monitor reads of one node: who it
// is, its status and how many allocations it still holds.
type NodeLiveness struct {
	ID, Name   string
	Status     structs.NodeStatus
	StatusAt   time.Time
	LiveAllocs int
}

// NodesLiveness returns every node's NodeLiveness, by ID, under one read
// lock and without copying the nodes: the monitor reads it every
// heartbeat interval, and a copy of every node (its GPUs, labels and
// addresses) that often is what made the leader's cost grow with the
// cluster.
func (f *FSM) NodesLiveness() []NodeLiveness {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]NodeLiveness, 0, len(f.st.nodes))
	for id, n := range f.st.nodes {
		out = append(out, NodeLiveness{ID: id, Name: n.Name, Status: n.Status, StatusAt: n.StatusAt, LiveAllocs: len(f.st.nodeLive[id])})
	}
	slices.SortFunc(out, func(a, b NodeLiveness) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// DrainingNodes returns copies of the nodes that drain, by ID: the
// leader's drain loop looks at them at every change, and going over
// every node that often would make its cost grow with the cluster.
func (f *FSM) DrainingNodes() []*structs.Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []*structs.Node
	for id := range f.st.draining {
		out = append(out, f.st.nodes[id].Copy())
	}
	slices.SortFunc(out, func(a, b *structs.Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}
