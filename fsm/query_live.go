package fsm

import "github.com/skein-dev/skein/structs"

// NodeLiveAllocs returns copies of the allocations on a node that still
// hold resources, by creation index. Its cost follows the node's live
// allocations, not its history, so a node can call it on every applied
// entry (the local loop, the gossip metadata).
func (f *FSM) NodeLiveAllocs(nodeID string) []*structs.Allocation {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return copyAllocs(sortedAllocs(f.st.nodeLive[nodeID]))
}
