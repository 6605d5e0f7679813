package node

import (
	"fmt"
	"runtime"
	"time"

	"github.com/skein-dev/skein/structs"
)

// register records this node's inventory in the replicated state.
func (n *Node) register() error {
	cpus, mem := n.cfg.CPUs, n.cfg.MemoryMiB
	if cpus == 0 {
		cpus = runtime.NumCPU()
	}
	if mem == 0 {
		mem = HostMemoryMiB()
	}
	link := n.cfg.LinkMbps
	if link == 0 {
		link = linkMbps(n.cfg.AdvertiseAddr)
	}
	inv := n.cfg.Inventory
	containers := n.engineReport()
	node := structs.Node{
		ID:          n.cfg.NodeID,
		Name:        n.cfg.Name,
		Addresses:   structs.Addresses{HTTP: n.cfg.HTTPAddr, Raft: n.cfg.RaftAddr, Gossip: n.cfg.GossipAddr},
		Labels:      n.cfg.Labels,
		Partitions:  n.cfg.Partitions,
		CPUs:        cpus,
		MemoryMiB:   mem,
		GPUs:        inv.GPUs,
		GPUSource:   inv.Source,
		GPUDriver:   inv.Driver,
		CUDAVersion: inv.CUDA,
		LinkMbps:    link,
		MasterPorts: n.cfg.MasterPorts,
		Containers:  containers,
		Confinement: structs.Clip(n.runner.Describe(), structs.MaxConfinementLen),
		JobsRefused: structs.Clip(n.runner.Refuses(), structs.MaxConfinementLen),
		JobPidsMax:  n.runner.PidsMax(),
		Status:      structs.NodeReady,
		Version:     structs.Version,
	}
	// Registering again (the container engine changed) keeps a drain.
	if old, ok := n.view.Node(n.cfg.NodeID); ok && isClosed(n.registered) && old.Status == structs.NodeDraining {
		node.Status, node.StatusReason = old.Status, old.StatusReason
	}
	if err := n.writeRegister(node); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	n.mu.Lock()
	n.engineRegistered = containers
	n.mu.Unlock()
	return nil
}

// isClosed is true once ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// registerLoop records this node's inventory, retrying until a leader
// takes it.
func (n *Node) registerLoop() {
	backoff := 100 * time.Millisecond
	for {
		err := n.register()
		if err == nil {
			close(n.registered)
			return
		}
		n.log.Debug("registration not accepted yet; retrying", "error", err)
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
