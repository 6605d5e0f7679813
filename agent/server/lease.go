package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
)

// passRenewals hands a round to the leader, or records it when this node
// has come to lead.
func (s *nodeRoutes) passRenewals(ctx context.Context, nodes []string) (string, error) {
	c, err := s.cfg.Peers.LeaderClient(ctx)
	if err != nil {
		return "", err
	}
	if c == nil {
		s.heardFrom(nodes)
		return s.cfg.NodeID, nil
	}
	resp, err := c.RelayHeartbeats(ctx, s.cfg.NodeID, nodes)
	if err != nil {
		return "", err
	}
	return resp.LeaderID, nil
}

// heardFrom records that the leader heard from nodes now.
func (s *nodeRoutes) heardFrom(nodes []string) {
	at := time.Now()
	for _, id := range nodes {
		s.cfg.Heartbeats.HeardFrom(id, at)
	}
}

// handleHeartbeat renews a node's lease: the leader records it (the
// leader's monitor, agent/leader), another server passes it on in its
// next round; a worker, which cannot, answers 503 and the node asks
// another.
func (s *nodeRoutes) handleHeartbeat(w http.ResponseWriter, r *http.Request) {
	var req api.HeartbeatRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !reportsFor(w, r, req.NodeID) {
		return
	}
	if s.cfg.Raft.IsLeader() {
		s.heardFrom([]string{req.NodeID})
		writeJSON(w, http.StatusOK, api.HeartbeatResponse{LeaderID: s.cfg.NodeID})
		return
	}
	if !s.isServer() {
		writeError(w, http.StatusServiceUnavailable, errNotServer)
		return
	}
	leader, err := s.leases.Renew(r.Context(), req.NodeID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("renew the lease through this server: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{LeaderID: leader})
}

// handleRelayedHeartbeats records a round of renewals a server passed on.
// Leader only; the sender must be a server, which checked each node's
// credentials as the leader would have.
func (s *nodeRoutes) handleRelayedHeartbeats(w http.ResponseWriter, r *http.Request) {
	var req api.RelayedHeartbeatsRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.From) {
		return
	}
	if len(req.NodeIDs) > leader.MaxRelayedNodes {
		writeError(w, http.StatusBadRequest, fmt.Errorf("node_ids: %d nodes, at most %d in one round", len(req.NodeIDs), leader.MaxRelayedNodes))
		return
	}
	servers, err := s.cfg.Raft.Servers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	if !cluster.HoldsState(servers, nil, req.From) {
		writeError(w, http.StatusForbidden, fmt.Errorf("from %q: %w", req.From, leader.ErrNotRelay))
		return
	}
	s.heardFrom(req.NodeIDs)
	writeJSON(w, http.StatusOK, api.HeartbeatResponse{LeaderID: s.cfg.NodeID})
}
