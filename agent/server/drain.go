package server

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// handleNodeDrain starts or ends a node's drain (POST
// /v1/nodes/{id}/drain and /undrain); a write, so the leader serves it and
// turns the deadline into a time.
func (s *Server) handleNodeDrain(w http.ResponseWriter, r *http.Request) {
	var req api.NodeDrainRequest
	drain := strings.HasSuffix(r.URL.Path, "/drain")
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil {
		err = checkDrain(&req, drain)
	}
	var n *structs.Node
	if err == nil {
		n, err = s.resolveNode(r.PathValue("id"))
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	at := now()
	cmd := structs.NodeDrainRequest{NodeID: n.ID, Drain: drain, Force: req.Force, Reason: req.Reason, At: at}
	if req.Deadline > 0 {
		cmd.Deadline = at.Add(time.Duration(req.Deadline))
	}
	resp, err := s.cfg.Apply(structs.NodeDrainType, cmd)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	got, ok := resp.(*structs.Node)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("node drain: unexpected answer %T from the state machine", resp))
		return
	}
	writeJSON(w, http.StatusOK, got)
}

// checkDrain checks a drain request's fields: an undrain takes only a
// reason.
func checkDrain(req *api.NodeDrainRequest, drain bool) error {
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

// handleNodeRemove forgets a node down or left (POST
// /v1/nodes/{id}/remove): out of Raft where it is a server, then out of
// the state. The leader does it.
func (s *Server) handleNodeRemove(w http.ResponseWriter, r *http.Request) {
	var req api.NodeRemoveRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil && len(req.Reason) > structs.MaxServiceReasonLen {
		err = &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Reason), structs.MaxServiceReasonLen)}
	}
	var n *structs.Node
	if err == nil {
		n, err = s.resolveNode(r.PathValue("id"))
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	if s.cfg.Forget == nil {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("this node cannot remove nodes"))
		return
	}
	if err := s.cfg.Forget(n.ID, cmp.Or(req.Reason, "removed by skein node remove")); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}
