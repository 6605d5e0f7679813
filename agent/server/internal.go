package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/structs"
)

// errNotLeaderHere answers agent-to-agent writes sent to a node that does
// not lead; the sender finds the leader again and retries.
var errNotLeaderHere = errors.Join(cluster.ErrNotLeader, errors.New("this node is not the leader"))

// leaderRequest decodes an agent-to-agent request that only the leader
// serves; on false it has answered already.
func (s *shared) leaderRequest(w http.ResponseWriter, r *http.Request, req any) bool {
	if err := decodeBody(w, r, req); err != nil {
		writeError(w, statusOf(err), err)
		return false
	}
	if !s.cfg.Raft.IsLeader() {
		writeError(w, http.StatusServiceUnavailable, errNotLeaderHere)
		return false
	}
	return true
}

// handleRegister commits another node's inventory. Leader only.
func (s *nodeRoutes) handleRegister(w http.ResponseWriter, r *http.Request) {
	var req api.RegisterRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.Node.ID) {
		return
	}
	_, err := s.cfg.Apply(structs.NodeRegisterType, structs.NodeRegisterRequest{Node: req.Node, At: now()})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	s.cfg.Heartbeats.HeardFrom(req.Node.ID, time.Now())
	writeJSON(w, http.StatusOK, struct{}{})
}

// handleAllocUpdates commits another node's allocation reports. Leader only;
// the FSM accepts a node's reports only for its own allocations.
func (s *nodeRoutes) handleAllocUpdates(w http.ResponseWriter, r *http.Request) {
	var req api.AllocUpdatesRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.NodeID) {
		return
	}
	_, err := s.cfg.Apply(structs.AllocUpdateType, structs.AllocUpdateRequest{NodeID: req.NodeID, Updates: req.Updates})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// handleGPUHealth commits another node's GPU health. Leader only; the FSM
// accepts a node's report only for its own GPUs.
func (s *nodeRoutes) handleGPUHealth(w http.ResponseWriter, r *http.Request) {
	var req structs.NodeGPUHealthRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.NodeID) {
		return
	}
	if _, err := s.cfg.Apply(structs.NodeGPUHealthType, req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// handleLoads hands another node's view of the autoscaled services' load
// to the leader's autoscaler. Leader only; nothing is written.
func (s *nodeRoutes) handleLoads(w http.ResponseWriter, r *http.Request) {
	var req api.LoadsRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.NodeID) {
		return
	}
	if err := structs.ValidateLoads(req.Services); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	if s.cfg.Autoscaler != nil {
		s.cfg.Autoscaler.ReportLoads(req.NodeID, req.Services, time.Now())
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// handleDepart takes a leaving node out of the cluster (POST
// /v1/internal/depart): out of Raft where it is a server, and marked
// left. The leaving node asks the leader, and waits for the answer
// before it stops, since a node the leader took out of Raft may never
// hear of it. Leader only; a node departs for itself alone.
func (s *nodeRoutes) handleDepart(w http.ResponseWriter, r *http.Request) {
	var req api.DepartRequest
	if !s.leaderRequest(w, r, &req) || !reportsFor(w, r, req.NodeID) {
		return
	}
	if s.cfg.Depart == nil {
		writeError(w, http.StatusServiceUnavailable, errors.New("this node cannot take nodes out of the cluster"))
		return
	}
	if err := s.cfg.Depart(req.NodeID); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
