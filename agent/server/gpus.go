package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// handleGPUs lists every GPU of every node, by node name and GPU index.
func (s *Server) handleGPUs(w http.ResponseWriter, r *http.Request) {
	view := s.fsm.State()
	jobs := map[string]string{} // GPU UUID -> job ID
	for _, alloc := range view.LiveAllocs {
		for _, g := range alloc.GPUs {
			jobs[g] = alloc.JobID
		}
	}
	out := []api.GPUInfo{}
	for _, n := range view.Nodes {
		for _, g := range n.GPUs {
			out = append(out, api.GPUInfo{Node: n.Name, NodeID: n.ID, GPU: g, Health: g.HealthState(), Job: jobs[g.UUID]})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleGPUCordon takes a GPU out of service by hand or returns it; a
// write, so it is served by the leader.
func (s *Server) handleGPUCordon(w http.ResponseWriter, r *http.Request) {
	var req api.GPURequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil && len(req.Reason) > structs.MaxHealthReasonLen {
		err = &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Reason), structs.MaxHealthReasonLen)}
	}
	var n *structs.Node
	var g *structs.GPU
	if err == nil {
		n, g, err = s.findGPU(req.Node, req.Index)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	resp, err := s.cfg.Apply(structs.GPUCordonType, structs.GPUCordonRequest{
		NodeID: n.ID, UUID: g.UUID, Cordon: strings.HasSuffix(r.URL.Path, "/cordon"), Reason: req.Reason, At: now(),
	})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	got, ok := resp.(*structs.GPU)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("gpu cordon: unexpected answer %T from the state machine", resp))
		return
	}
	info := api.GPUInfo{Node: n.Name, NodeID: n.ID, GPU: *got, Health: got.HealthState()}
	for _, alloc := range s.fsm.NodeLiveAllocs(n.ID) {
		if slices.Contains(alloc.GPUs, got.UUID) {
			info.Job = alloc.JobID
		}
	}
	writeJSON(w, http.StatusOK, info)
}

// handleGPUFault injects a health event into a simulated GPU, on the node
// that owns it (other nodes pass the request on). Real GPUs refuse it.
func (s *Server) handleGPUFault(w http.ResponseWriter, r *http.Request) {
	var req api.GPUFaultRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil {
		err = checkFault(&req)
	}
	var n *structs.Node
	var g *structs.GPU
	if err == nil {
		n, g, err = s.findGPU(req.Node, req.Index)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if n.ID != s.cfg.NodeID {
		addr := s.cfg.Peers.HTTPAddrOf(n.ID)
		if addr == "" {
			writeError(w, http.StatusBadGateway, fmt.Errorf("node %s: address unknown", n.Name))
			return
		}
		s.proxy(w, r, addr, body)
		return
	}
	notSimulated := fmt.Errorf("GPU %d on node %s is not simulated: faults can only be injected into simulated GPUs", g.Index, n.Name)
	if !g.Simulated {
		writeError(w, http.StatusBadRequest, notSimulated)
		return
	}
	ev := gpu.Event{Index: g.Index, UUID: g.UUID, Kind: gpu.EventKind(req.Kind), Reason: req.Reason, PIDs: req.PIDs, At: now()}
	switch err := s.cfg.Faults.InjectFault(ev); {
	case errors.Is(err, gpu.ErrNotSimulated):
		writeError(w, http.StatusBadRequest, notSimulated)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	s.log.Info("injected a GPU health event", "index", g.Index, "kind", ev.Kind, "reason", ev.Reason)
	writeJSON(w, http.StatusAccepted, struct{}{})
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

// findGPU resolves a node (name, ID or unique ID prefix) and one of its
// GPUs by index.
func (s *Server) findGPU(node string, index int) (*structs.Node, *structs.GPU, error) {
	n, err := s.resolveNode(node)
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

// resolveNode finds a node by exact name, exact ID, or unique ID prefix.
func (s *Server) resolveNode(name string) (*structs.Node, error) {
	if name == "" {
		return nil, &structs.FieldError{Field: "node", Msg: "empty: give a node name or ID"}
	}
	nodes := s.fsm.Nodes()
	var byName, byPrefix []*structs.Node
	for _, n := range nodes {
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
