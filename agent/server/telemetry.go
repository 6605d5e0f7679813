package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// errNodeAddrUnknown: a node to ask has no known API address.
var errNodeAddrUnknown = errors.New("its API address is unknown")

// maxTelemetryBytes bounds a node's answer with its GPUs' telemetry: a
// few hundred bytes a GPU.
const maxTelemetryBytes = 1 << 20

// handleNodeTelemetry serves GET /v1/internal/nodes/{id}/telemetry to a
// server whose web UI shows this node's page (nodeTelemetry): the latest
// readings of this node's GPUs, the last its telemetry took (never a
// call into the driver). An empty list when it reads none.
func (s *nodeRoutes) handleNodeTelemetry(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.cfg.NodeID {
		writeError(w, http.StatusNotFound, fmt.Errorf("node %s: this is node %s", structs.ShortID(id), structs.ShortID(s.cfg.NodeID)))
		return
	}
	out := []gpu.Sample{}
	if s.cfg.Telemetry != nil {
		if got := s.cfg.Telemetry.Sample(); got != nil {
			out = got
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// nodeTelemetry asks another node for its GPUs' latest telemetry
// (handleNodeTelemetry) with this node's credential, as the logs of a
// job that ran there are read: a worker holds no ACLs to check a
// user's token with, and this node's UI has checked the user. ctx bounds
// the call (the UI's wait); Calls bounds it besides.
func (s *nodeRoutes) nodeTelemetry(ctx context.Context, nodeID string) ([]gpu.Sample, error) {
	addr := s.cfg.Peers.HTTPAddrOf(nodeID)
	if addr == "" {
		return nil, errNodeAddrUnknown
	}
	req, err := s.cfg.Peers.NewRequest(ctx, http.MethodGet, addr+internalPrefix+"nodes/"+url.PathEscape(nodeID)+"/telemetry", nil)
	if err != nil {
		return nil, err
	}
	var out []gpu.Sample
	if err := s.callNode(req, maxTelemetryBytes, &out); err != nil {
		return nil, fmt.Errorf("the telemetry of node %s: %w", structs.ShortID(nodeID), err)
	}
	return out, nil
}
