package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// The cluster's reads (endpoint.Cluster): nodes, status, members, Raft
// peers.

func (s *clusterRoutes) handleNodes(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.clusterView.Nodes())
}

func (s *clusterRoutes) handleStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.clusterView.Status(r.URL.Query().Get("hash") == "true"))
}

func (s *clusterRoutes) handleMembers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.clusterView.Members())
}

func (s *clusterRoutes) handleRaftPeers(w http.ResponseWriter, r *http.Request) {
	peers, err := s.clusterView.RaftPeers()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	writeJSON(w, http.StatusOK, peers)
}

func (s *clusterRoutes) handleJoin(w http.ResponseWriter, r *http.Request) {
	var req api.JoinRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if len(req.Addrs) == 0 || len(req.Addrs) > 64 {
		writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "addrs", Msg: fmt.Sprintf("%d addresses; give 1 to 64", len(req.Addrs))})
		return
	}
	n, err := s.cfg.Raft.Join(req.Addrs)
	if n == 0 {
		if err == nil {
			err = errors.New("no member answered")
		}
		writeError(w, http.StatusBadGateway, fmt.Errorf("join %v: %w", req.Addrs, err))
		return
	}
	writeJSON(w, http.StatusOK, api.JoinResponse{Joined: n})
}

// handleLeave answers, then leaves in the background: local jobs stop,
// leadership moves if this node leads, the node leaves gossip and Raft, and
// Done closes so the process can exit. It refuses what
// endpoint.Cluster.CanLeave refuses.
func (s *clusterRoutes) handleLeave(w http.ResponseWriter, r *http.Request) {
	if err := s.clusterView.CanLeave(); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, api.LeaveResponse{Node: s.cfg.NodeName})
	go s.cfg.Leave()
}
