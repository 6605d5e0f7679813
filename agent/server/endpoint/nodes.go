package endpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// NodesState is what the nodes' endpoints read of the state (fsm.FSM).
type NodesState interface {
	Nodes() []*structs.Node
	NodeLiveAllocs(nodeID string) []*structs.Allocation
}

// Nodes drains, undrains and removes nodes and cordons their GPUs.
type Nodes struct {
	State NodesState
	// Forget removes a node down or left from the state, and from Raft
	// where it is a server (this node must lead). nil: this node cannot.
	Forget func(nodeID, reason string) error
}

// Resolve finds a node by exact name, exact ID, or unique ID prefix.
func (s Nodes) Resolve(name string) (*structs.Node, error) {
	if name == "" {
		return nil, &structs.FieldError{Field: "node", Msg: "empty: give a node name or ID"}
	}
	var byName, byPrefix []*structs.Node
	for _, n := range s.State.Nodes() {
		if n.ID == name {
			return n, nil
		}
		if n.Name == name {
			byName = append(byName, n)
		}
		if strings.HasPrefix(n.ID, name) {
			byPrefix = append(byPrefix, n)
		}
	}
	for _, found := range [][]*structs.Node{byName, byPrefix} {
		switch len(found) {
		case 0:
			continue
		case 1:
			return found[0], nil
		}
		return nil, &structs.FieldError{Field: "node", Msg: fmt.Sprintf("%q matches %d nodes: use the node ID", name, len(found))}
	}
	return nil, fmt.Errorf("node %q: %w", name, fsm.ErrNodeNotFound)
}

// FindGPU resolves a node (as Resolve does) and one of its GPUs by index.
func (s Nodes) FindGPU(node string, index int) (*structs.Node, *structs.GPU, error) {
	n, err := s.Resolve(node)
	if err != nil {
		return nil, nil, err
	}
	for i := range n.GPUs {
		if n.GPUs[i].Index == index {
			return n, &n.GPUs[i], nil
		}
	}
	if len(n.GPUs) == 0 {
		return nil, nil, &structs.FieldError{Field: "index", Msg: fmt.Sprintf("%d: node %s has no GPUs", index, n.Name)}
	}
	return nil, nil, &structs.FieldError{Field: "index", Msg: fmt.Sprintf("%d: node %s has GPUs %d..%d", index, n.Name, n.GPUs[0].Index, n.GPUs[len(n.GPUs)-1].Index)}
}

// Drain starts (drain) or ends a drain of the node ref names; the leader
// turns the deadline into a time. It answers the node.
func (s Nodes) Drain(w Writer, ref string, drain bool, req api.NodeDrainRequest) (*structs.Node, error) {
	if err := checkDrain(req, drain); err != nil {
		return nil, err
	}
	n, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	resp, err := w.Write(structs.NodeDrainType, nil, func() (any, error) {
		at := now()
		cmd := structs.NodeDrainRequest{NodeID: n.ID, Drain: drain, Force: req.Force, Reason: req.Reason, At: at}
		if req.Deadline > 0 {
			cmd.Deadline = at.Add(time.Duration(req.Deadline))
		}
		return cmd, nil
	})
	if err != nil {
		return nil, err
	}
	got, ok := resp.(*structs.Node)
	if !ok {
		return nil, fmt.Errorf("node drain: unexpected answer %T from the state machine", resp)
	}
	return got, nil
}

// checkDrain checks a drain request's fields: an undrain takes only a
// reason.
func checkDrain(req api.NodeDrainRequest, drain bool) error {
	switch {
	case len(req.Reason) > structs.MaxServiceReasonLen:
		return &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Reason), structs.MaxServiceReasonLen)}
	case req.Deadline < 0 || time.Duration(req.Deadline) > structs.MaxDrainDeadline:
		return &structs.FieldError{Field: "deadline", Msg: fmt.Sprintf("%s is out of range 0..%s", req.Deadline, structs.MaxDrainDeadline)}
	case !drain && (req.Deadline != 0 || req.Force):
		return &structs.FieldError{Field: "deadline", Msg: "an undrain takes no deadline and no force"}
	}
	return nil
}

// Remove forgets the node ref names, down or left: out of Raft where it
// is a server, then out of the state. The leader does it; it answers the
// node as it was.
func (s Nodes) Remove(w Writer, ref string, req api.NodeRemoveRequest) (*structs.Node, error) {
	if len(req.Reason) > structs.MaxServiceReasonLen {
		return nil, &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Reason), structs.MaxServiceReasonLen)}
	}
	n, err := s.Resolve(ref)
	if err != nil {
		return nil, err
	}
	_, err = w.Lead(nil, func() (any, error) {
		if s.Forget == nil {
			return nil, ErrCannotRemove
		}
		return nil, s.Forget(n.ID, cmp.Or(req.Reason, "removed by skein node remove"))
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// CordonGPU takes a GPU out of service by hand (cordon) or returns it,
// and answers it with the job that holds it.
func (s Nodes) CordonGPU(w Writer, req api.GPURequest, cordon bool) (api.GPUInfo, error) {
	if len(req.Reason) > structs.MaxHealthReasonLen {
		return api.GPUInfo{}, &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Reason), structs.MaxHealthReasonLen)}
	}
	n, g, err := s.FindGPU(req.Node, req.Index)
	if err != nil {
		return api.GPUInfo{}, err
	}
	resp, err := w.Write(structs.GPUCordonType, nil, func() (any, error) {
		return structs.GPUCordonRequest{NodeID: n.ID, UUID: g.UUID, Cordon: cordon, Reason: req.Reason, At: now()}, nil
	})
	if err != nil {
		return api.GPUInfo{}, err
	}
	got, ok := resp.(*structs.GPU)
	if !ok {
		return api.GPUInfo{}, fmt.Errorf("gpu cordon: unexpected answer %T from the state machine", resp)
	}
	info := api.GPUInfo{Node: n.Name, NodeID: n.ID, GPU: *got, Health: got.HealthState()}
	for _, alloc := range s.State.NodeLiveAllocs(n.ID) {
		if slices.Contains(alloc.GPUs, got.UUID) {
			info.Job = alloc.JobID
		}
	}
	return info, nil
}

// FaultTarget checks a health event to inject into a simulated GPU,
// filling in its defaults, and finds the GPU (as FindGPU does) and the
// node that owns it, which injects it.
func (s Nodes) FaultTarget(req *api.GPUFaultRequest) (*structs.Node, *structs.GPU, error) {
	if err := checkFault(req); err != nil {
		return nil, nil, err
	}
	return s.FindGPU(req.Node, req.Index)
}

// checkFault fills in the defaults of an injected event and checks it.
func checkFault(req *api.GPUFaultRequest) error {
	switch req.Kind {
	case "":
		req.Kind = string(gpu.Fatal)
	case string(gpu.Fatal), string(gpu.Warning), string(gpu.Processes):
	default:
		return &structs.FieldError{Field: "kind", Msg: fmt.Sprintf("%q: want fatal, warning or processes", req.Kind)}
	}
	if req.Reason == "" && req.Kind != string(gpu.Processes) {
		req.Reason = "injected " + req.Kind + " fault"
	}
	switch {
	case len(req.Reason) > structs.MaxHealthReasonLen:
		return &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Reason), structs.MaxHealthReasonLen)}
	case len(req.PIDs) > 0 && req.Kind != string(gpu.Processes):
		return &structs.FieldError{Field: "pids", Msg: "only go with kind processes"}
	case len(req.PIDs) > 1024:
		return &structs.FieldError{Field: "pids", Msg: fmt.Sprintf("%d PIDs; at most 1024", len(req.PIDs))}
	}
	return nil
}
