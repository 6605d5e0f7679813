package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// handleGPUs lists every GPU of every node, by node name and GPU index
// (endpoint.Cluster.GPUs).
func (s *clusterRoutes) handleGPUs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.clusterView.GPUs())
}

// handleGPUCordon takes a GPU out of service by hand or returns it
// (endpoint.Nodes.CordonGPU).
func (s *clusterRoutes) handleGPUCordon(w http.ResponseWriter, r *http.Request) {
	var req api.GPURequest
	cordon := strings.HasSuffix(r.URL.Path, "/cordon")
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) {
		return s.nodes.CordonGPU(wr, req, cordon)
	})
}

// handleGPUFault injects a health event into a simulated GPU, on the node
// that owns it (other nodes pass the request on; endpoint.Nodes.FaultTarget
// checks the request and finds the GPU). Real GPUs refuse it.
func (s *clusterRoutes) handleGPUFault(w http.ResponseWriter, r *http.Request) {
	var req api.GPUFaultRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	var n *structs.Node
	var g *structs.GPU
	if err == nil {
		n, g, err = s.nodes.FaultTarget(&req)
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
