package fsm

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyNodeRegister adds a node or replaces its inventory. The first
// registration's time is kept; the role is never stored (the serving agent
// fills it in from the Raft configuration).
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
	if old, ok := s.nodes[n.ID]; ok {
		n.RegisteredAt = old.RegisteredAt
	} else if !req.At.IsZero() {
		n.RegisteredAt = req.At
	}
	n.ModifyIndex = l.Index
	s.nodes[n.ID] = n
	return nil
}

func validateNode(n *structs.Node) error {
	if n.ID == "" {
		return fmt.Errorf("node register: %w: empty node id", ErrInvalidRequest)
	}
	switch n.Status {
	case "", structs.NodeReady, structs.NodeDown, structs.NodeDraining, structs.NodeLeft:
	default:
		return fmt.Errorf("node %s: %w: unknown status %q", n.ID, ErrInvalidRequest, n.Status)
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
