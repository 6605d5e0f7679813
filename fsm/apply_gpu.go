package fsm

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// Default reasons of GPU health changes.
const (
	reasonCordoned   = "cordoned by hand"
	reasonGPUFailure = "GPU failure"
)

// applyNodeGPUHealth records a node's view of its GPUs' health. A GPU that
// is unhealthy afterwards stops every live allocation holding it, with the
// fault as the reason; their jobs restart without using a restart (see
// decideJob). Foreign processes and warnings only change what is shown and
// what may be placed. The whole request is checked before anything changes.
func (s *state) applyNodeGPUHealth(l *raft.Log) any {
	var req structs.NodeGPUHealthRequest
	decode(l, &req)
	n, ok := s.nodes[req.NodeID]
	if !ok {
		return fmt.Errorf("gpu health: node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	}
	seen := make(map[string]bool, len(req.GPUs))
	for i, h := range req.GPUs {
		g := findGPU(n, h.UUID)
		bad := ""
		switch {
		case g == nil:
			bad = fmt.Sprintf("uuid %q is not a GPU of the node", h.UUID)
		case seen[h.UUID]:
			bad = fmt.Sprintf("uuid %s listed twice", h.UUID)
		case len(h.Reason) > structs.MaxHealthReasonLen || len(h.Warning) > structs.MaxHealthReasonLen:
			bad = fmt.Sprintf("reason or warning longer than %d bytes", structs.MaxHealthReasonLen)
		case h.ForeignProcesses < 0:
			bad = fmt.Sprintf("foreign_processes %d is negative", h.ForeignProcesses)
		case !h.Healthy && h.LastFaultAt.IsZero():
			bad = "unhealthy without last_fault_at"
		}
		if bad != "" {
			return fmt.Errorf("gpu health: node %s: %w: gpus[%d]: %s", nodeName(n), ErrInvalidRequest, i, bad)
		}
		seen[h.UUID] = true
	}
	copied := false
	for _, h := range req.GPUs {
		g := findGPU(n, h.UUID)
		next := *g
		next.Warning, next.ForeignProcesses, next.ForeignAllowed = h.Warning, h.ForeignProcesses, h.ForeignAllowed
		// A fault seen before a person returned the GPU to service is stale.
		if !h.Healthy && h.LastFaultAt.After(g.ClearedAt) {
			next.Healthy = false
			next.Reason = h.Reason
			if next.Reason == "" {
				next.Reason = reasonGPUFailure
			}
			next.UnhealthySince = h.UnhealthySince
			if next.UnhealthySince.IsZero() {
				next.UnhealthySince = h.LastFaultAt
			}
			next.LastFaultAt = h.LastFaultAt
		} else {
			next.Healthy, next.Reason, next.UnhealthySince = true, "", time.Time{}
		}
		switch {
		case g.Healthy && !next.Healthy:
			s.emitGPU(l.Index, structs.EventGPUFault, n, g, req.At, next.Reason)
		case !g.Healthy && next.Healthy:
			s.emitGPU(l.Index, structs.EventGPURecovered, n, g, req.At, "healthy again after "+g.Reason)
		}
		if healthChanged(g, &next) {
			if !copied {
				n, copied = s.writableNode(n), true
				g = findGPU(n, h.UUID)
			}
			*g = next
			n.ModifyIndex = l.Index
		}
		if !g.Healthy {
			s.stopOnFault(n, g, l.Index)
		}
	}
	return nil
}

// stopOnFault asks the live allocation holding a failed GPU, if any, to
// stop, and marks it so its job's restart is not charged to the job.
func (s *state) stopOnFault(n *structs.Node, g *structs.GPU, index uint64) {
	id, ok := s.gpuHolder[g.UUID]
	if !ok {
		return
	}
	a := s.allocs[id]
	if a.GPUFault == "" {
		a.GPUFault = fmt.Sprintf("GPU %d on node %s unhealthy: %s", g.Index, nodeName(n), g.Reason)
		a.Reason = a.GPUFault
		a.ModifyIndex = index
	}
	stopAlloc(a, index)
}

// applyGPUCordon takes a GPU out of service by hand, or returns it, and
// returns a copy of the GPU. A cordon stops no work: like a node drain, it
// only keeps new work off. Returning a GPU also ends a fault quarantine,
// since a person has judged it fine: faults the node saw before that no
// longer count (ClearedAt), later ones do.
func (s *state) applyGPUCordon(l *raft.Log) any {
	var req structs.GPUCordonRequest
	decode(l, &req)
	n, ok := s.nodes[req.NodeID]
	if !ok {
		return fmt.Errorf("gpu cordon: node %s: %w", structs.ShortID(req.NodeID), ErrNodeNotFound)
	}
	g := findGPU(n, req.UUID)
	switch {
	case g == nil:
		return fmt.Errorf("gpu cordon: node %s: %w: uuid %q is not a GPU of the node", nodeName(n), ErrInvalidRequest, req.UUID)
	case len(req.Reason) > structs.MaxHealthReasonLen:
		return fmt.Errorf("gpu cordon: %w: reason longer than %d bytes", ErrInvalidRequest, structs.MaxHealthReasonLen)
	}
	next := *g
	if req.Cordon {
		next.Cordoned = true
		next.CordonReason = req.Reason
		if next.CordonReason == "" {
			next.CordonReason = reasonCordoned
		}
		if !g.Cordoned {
			next.CordonedAt = req.At
		}
	} else {
		next.Cordoned, next.CordonReason, next.CordonedAt = false, "", time.Time{}
		next.Healthy, next.Reason, next.UnhealthySince = true, "", time.Time{}
		next.ClearedAt = req.At
	}
	switch {
	case req.Cordon && !g.Cordoned:
		s.emitGPU(l.Index, structs.EventGPUCordoned, n, g, req.At, next.CordonReason)
	case !req.Cordon && (g.Cordoned || !g.Healthy):
		why := "returned to service"
		if !g.Healthy {
			why += ", ending its fault quarantine (" + g.Reason + ")"
		}
		s.emitGPU(l.Index, structs.EventGPUUncordoned, n, g, req.At, withReason(why, req.Reason))
	}
	if healthChanged(g, &next) {
		n = s.writableNode(n)
		*findGPU(n, req.UUID) = next
		n.ModifyIndex = l.Index
	}
	c := n.Copy()
	for i := range c.GPUs {
		if c.GPUs[i].UUID == req.UUID {
			return &c.GPUs[i]
		}
	}
	return nil
}

// findGPU returns the node's GPU with this UUID, or nil.
func findGPU(n *structs.Node, uuid string) *structs.GPU {
	for i := range n.GPUs {
		if n.GPUs[i].UUID == uuid {
			return &n.GPUs[i]
		}
	}
	return nil
}

// healthChanged reports whether any health field differs between a and b.
func healthChanged(a, b *structs.GPU) bool {
	return a.Healthy != b.Healthy || a.Reason != b.Reason ||
		a.Cordoned != b.Cordoned || a.CordonReason != b.CordonReason || !a.CordonedAt.Equal(b.CordonedAt) ||
		!a.UnhealthySince.Equal(b.UnhealthySince) || !a.LastFaultAt.Equal(b.LastFaultAt) ||
		!a.ClearedAt.Equal(b.ClearedAt) || a.Warning != b.Warning ||
		a.ForeignProcesses != b.ForeignProcesses || a.ForeignAllowed != b.ForeignAllowed
}

// keepHealth carries the health of GPUs the state already knows over a
// re-registration: the inventory is the node's to replace, but a cordon is
// a person's decision and a fault quarantine outlives an agent restart (the
// agent picks it up from the state and ends it after its clean period). A
// GPU that discovery itself finds unhealthy is registered unhealthy.
func keepHealth(old, n *structs.Node) {
	for i := range n.GPUs {
		g := &n.GPUs[i]
		o := findGPU(old, g.UUID)
		if o == nil {
			continue
		}
		if g.Healthy {
			g.Healthy, g.Reason = o.Healthy, o.Reason
		}
		g.Cordoned, g.CordonReason, g.CordonedAt = o.Cordoned, o.CordonReason, o.CordonedAt
		g.UnhealthySince, g.LastFaultAt, g.ClearedAt = o.UnhealthySince, o.LastFaultAt, o.ClearedAt
		g.Warning, g.ForeignProcesses, g.ForeignAllowed = o.Warning, o.ForeignProcesses, o.ForeignAllowed
	}
}
