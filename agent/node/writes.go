package node

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// This node's writes go through the leader's internal API, or straight
// into Raft when this node leads.

// writeRegister commits a node registration.
func (n *Node) writeRegister(node structs.Node) error {
	c, err := n.cfg.Peers.LeaderClient(n.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		_, err := n.cfg.Apply(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: node, At: now()})
		return err
	}
	return c.Register(n.ctx, node)
}

// writeAllocUpdates commits this node's allocation reports.
func (n *Node) writeAllocUpdates(updates []structs.AllocUpdate) error {
	c, err := n.cfg.Peers.LeaderClient(n.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		_, err := n.cfg.Apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: n.cfg.NodeID, Updates: updates})
		return err
	}
	return c.UpdateAllocs(n.ctx, n.cfg.NodeID, updates)
}

// writeGPUHealth commits this node's GPU health.
func (n *Node) writeGPUHealth(req structs.NodeGPUHealthRequest) error {
	c, err := n.cfg.Peers.LeaderClient(n.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		_, err := n.cfg.Apply(structs.NodeGPUHealthType, req)
		return err
	}
	return c.UpdateGPUHealth(n.ctx, req)
}

// writeLoads sends this node's view of the autoscaled services' load to
// the leader, or hands it over when this node leads.
func (n *Node) writeLoads(loads []structs.ServiceLoad) error {
	c, err := n.cfg.Peers.LeaderClient(n.ctx)
	if err != nil {
		return err
	}
	if c == nil {
		if n.cfg.Loads != nil {
			n.cfg.Loads.ReportLoads(n.cfg.NodeID, loads, time.Now())
		}
		return nil
	}
	return c.ReportLoads(n.ctx, n.cfg.NodeID, loads)
}
