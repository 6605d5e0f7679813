package fsm

import (
	"cmp"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyNodeRegister adds a node or replaces its inventory. The first
// registration's time is kept, and so is a drain (only NodeDrain sets it), and so is the health of every GPU the state
// already knows (keepHealth); the role is never stored (the serving agent
// fills it in from the Raft configuration). Work on a GPU registered
// unhealthy is stopped, as for a health report.
func (s *state) applyNodeRegister(l *raft.Log) any {
	var req structs.NodeRegisterRequest
	decode(l, &req)
	n := &req.Node
	if err := validateNode(n); err != nil {
		return err
	}
	if n.Status == "" {
		n.Status = structs.NodeReady
	}
	n.Role = ""
	n.Drain = nil
	old, known := s.nodes[n.ID]
	if known {
		n.Drain = old.Drain.Copy()
		n.RegisteredAt = old.RegisteredAt
		keepHealth(old, n)
	} else if !req.At.IsZero() {
		n.RegisteredAt = req.At
	}
	n.ModifyIndex = l.Index
	s.nodes[n.ID] = n
	switch {
	case !known:
		s.emitNode(l.Index, structs.EventNodeJoined, n, req.At, fmt.Sprintf("registered with %s (%s)", gpusText(len(n.GPUs)), cmp.Or(n.GPUSource, "none")))
	case old.Status != n.Status:
		s.emitNode(l.Index, nodeStatusEvents[n.Status], n, req.At, fmt.Sprintf("registered again, was %s", old.Status))
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		if g.Healthy {
			continue
		}
		if !known || wasHealthy(old, g.UUID) {
			s.emitGPU(l.Index, structs.EventGPUFault, n, g, req.At, "registered unhealthy: "+g.Reason)
		}
		s.stopOnFault(n, g, l.Index)
	}
	return nil
}

// wasHealthy reports whether the GPU uuid was healthy on node n, or not
// on it.
func wasHealthy(n *structs.Node, uuid string) bool {
	g := findGPU(n, uuid)
	return g == nil || g.Healthy
}

// maxVersionLen bounds the driver and CUDA version strings of a node.
const maxVersionLen = 64

func validateNode(n *structs.Node) error {
	if n.ID == "" {
		return fmt.Errorf("node register: %w: empty node id", ErrInvalidRequest)
	}
	switch n.Status {
	case "", structs.NodeReady, structs.NodeDown, structs.NodeDraining, structs.NodeLeft:
	default:
		return fmt.Errorf("node %s: %w: unknown status %q", n.ID, ErrInvalidRequest, n.Status)
	}
	if n.MasterPorts != (structs.PortRange{}) {
		if err := n.MasterPorts.Validate(); err != nil {
			return fmt.Errorf("node %s: %w: master ports: %w", n.ID, ErrInvalidRequest, err)
		}
	}
	if len(n.GPUDriver) > maxVersionLen || len(n.CUDAVersion) > maxVersionLen {
		return fmt.Errorf("node %s: %w: GPU driver or CUDA version longer than %d bytes", n.ID, ErrInvalidRequest, maxVersionLen)
	}
	if n.Containers != nil {
		if err := n.Containers.Validate(); err != nil {
			return fmt.Errorf("node %s: %w: %w", n.ID, ErrInvalidRequest, err)
		}
	}
	if n.LinkMbps < 0 {
		return fmt.Errorf("node %s: %w: link speed %d Mb/s is negative", n.ID, ErrInvalidRequest, n.LinkMbps)
	}
	if len(n.Confinement) > structs.MaxConfinementLen || len(n.JobsRefused) > structs.MaxConfinementLen || n.JobPidsMax < 0 {
		return fmt.Errorf("node %s: %w: confinement or refusal longer than %d bytes, or a negative job pids max", n.ID, ErrInvalidRequest, structs.MaxConfinementLen)
	}
	seen := make(map[string]bool, len(n.GPUs))
	for _, g := range n.GPUs {
		if g.UUID == "" {
			return fmt.Errorf("node %s: %w: GPU %d has no UUID", n.ID, ErrInvalidRequest, g.Index)
		}
		if seen[g.UUID] {
			return fmt.Errorf("node %s: %w: GPU %s listed twice", n.ID, ErrInvalidRequest, g.UUID)
		}
		seen[g.UUID] = true
	}
	return nil
}

// applyNodeStatus changes a node's status. It never touches the node's
// allocations: a down node keeps them until NodeAllocsLost says otherwise.
func (s *state) applyNodeStatus(l *raft.Log) any {
	var req structs.NodeStatusRequest
	decode(l, &req)
	n, ok := s.nodes[req.NodeID]
	if !ok {
		return fmt.Errorf("node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	}
	switch req.Status {
	case structs.NodeReady, structs.NodeDown, structs.NodeDraining, structs.NodeLeft:
	default:
		return fmt.Errorf("node %s: %w: unknown status %q", n.Name, ErrInvalidRequest, req.Status)
	}
	if n.Status == req.Status && n.StatusReason == req.Reason {
		return nil
	}
	if n.Status != req.Status {
		s.emitNode(l.Index, nodeStatusEvents[req.Status], n, req.At, withReason("was "+string(n.Status), req.Reason))
	}
	n = s.writableNode(n)
	n.Status = req.Status
	n.StatusReason = req.Reason
	n.StatusAt = req.At
	n.ModifyIndex = l.Index
	return nil
}

// applyNodeAllocsLost ends every live allocation of a node that is not ready
// as lost. Each allocation moves to lost once, so repeating the request (a
// new leader deciding again) replaces nothing twice.
func (s *state) applyNodeAllocsLost(l *raft.Log) any {
	var req structs.NodeAllocsLostRequest
	decode(l, &req)
	n, ok := s.nodes[req.NodeID]
	if !ok {
		return fmt.Errorf("node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	}
	if n.Status == structs.NodeReady || n.Status == structs.NodeDraining {
		return fmt.Errorf("node %s: %w: it is %s, so its allocations are not lost", n.Name, ErrInvalidRequest, n.Status)
	}
	u := structs.AllocUpdate{State: structs.AllocLost, ExitCode: -1, Reason: req.Reason, At: req.At}
	// Ending one allocation may stop, never end, others of its gang, so
	// the list taken first holds only allocations still live.
	lost := sortedAllocs(s.nodeLive[n.ID])
	if len(lost) > 0 {
		s.emitNode(l.Index, structs.EventNodeLost, n, req.At, withReason(fmt.Sprintf("%d of its allocations lost", len(lost)), req.Reason))
	}
	for _, a := range lost {
		s.endAlloc(a, &u, l.Index)
	}
	return nil
}

// applyNodeRemove forgets a node that is down or has left
// (structs.NodeRemoveRequest) and returns a copy of it. A ready node, or
// one with live allocations, is refused.
func (s *state) applyNodeRemove(l *raft.Log) any {
	var req structs.NodeRemoveRequest
	decode(l, &req)
	n, ok := s.nodes[req.NodeID]
	switch {
	case !ok:
		return fmt.Errorf("node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	case n.Status != structs.NodeDown && n.Status != structs.NodeLeft:
		return fmt.Errorf("node %s: %w: it is %s; only a node down or left is removed", nodeName(n), ErrInvalidRequest, n.Status)
	case len(s.nodeLive[n.ID]) > 0:
		return fmt.Errorf("node %s: %w: %d of its allocations are not declared lost yet: wait until it has been down for the cluster's down-after", nodeName(n), ErrInvalidRequest, len(s.nodeLive[n.ID]))
	}
	delete(s.nodes, n.ID)
	delete(s.draining, n.ID)
	delete(s.nodeLive, n.ID)
	delete(s.nodeUsed, n.ID)
	s.emitNode(l.Index, structs.EventNodeRemoved, n, req.At, withReason("forgotten, was "+string(n.Status), req.Reason))
	return n.Copy()
}
