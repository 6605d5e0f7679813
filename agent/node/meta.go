package node

import (
	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// InventoryMeta is what a node announces before it knows anything of the
// cluster: its name, API address and GPUs, every placeable one free.
func InventoryMeta(name, httpAddr string, inv gpu.Inventory) peer.Meta {
	return peer.Meta{Name: name, HTTP: httpAddr, GPUsTotal: len(inv.GPUs), Version: structs.Version,
		GPUsFree: freeGPUs(inv.GPUs, nil, 0), API: structs.APIVersion, Log: structs.LogVersion(), Snapshot: fsm.SnapshotVersion}
}

// Meta describes this node for gossip from its inventory, the GPU health
// it sees itself (ahead of the commit), its view and whether it is a
// server.
func (n *Node) Meta() peer.Meta {
	used := map[string]bool{}
	for _, alloc := range n.view.NodeLiveAllocs(n.cfg.NodeID) {
		for _, g := range alloc.GPUs {
			used[g] = true
		}
	}
	gpus := n.cfg.Inventory.GPUs
	if self, ok := n.view.Node(n.cfg.NodeID); ok {
		gpus = self.GPUs
	}
	m := InventoryMeta(n.cfg.Name, n.cfg.HTTPAddr, n.cfg.Inventory)
	m.Unhealthy = n.health.mask.Load()
	m.Server = n.server.Load()
	m.GPUsFree = freeGPUs(gpus, used, m.Unhealthy)
	return m
}

// freeGPUs counts the placeable GPUs that no live allocation holds and
// the node does not see as unhealthy (bit i of unhealthy for GPU i).
func freeGPUs(gpus []structs.GPU, used map[string]bool, unhealthy uint64) int {
	free := 0
	for _, g := range gpus {
		masked := g.Index >= 0 && g.Index < 64 && unhealthy&(1<<g.Index) != 0
		if ok, _ := g.Placeable(); ok && !masked && !used[g.UUID] {
			free++
		}
	}
	return free
}

// Server reports whether this node holds the state, as its view loop last
// found (at most a second ago).
func (n *Node) Server() bool { return n.server.Load() }

// refreshMeta re-announces this node when what gossip says of it changed.
func (n *Node) refreshMeta() { n.cfg.Announce.Set(n.Meta()) }
