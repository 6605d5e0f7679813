package server

import (
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// handleJobUpdate holds, releases or changes a queued job, or every
// queued task of an array (scontrol hold, release and update): the job
// by its number, ID or prefix, as cancel finds it.
func (s *Server) handleJobUpdate(w http.ResponseWriter, r *http.Request) {
	var u api.JobUpdate
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &u)
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	req := structs.JobUpdateRequest{Hold: u.Hold, Name: u.Name, TimeLimit: u.TimeLimit, Priority: u.Priority}
	if req.Empty() {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: nothing to change: give hold, name, time_limit or priority", errBadRequest))
		return
	}
	var ok bool
	if req.JobID, req.ArrayID, ok = s.jobOrArray(w, r, "update"); !ok {
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	req.At = now()
	resp, err := s.cfg.Apply(structs.JobUpdateType, req)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	jobs, ok := resp.([]*structs.Job)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("update: unexpected answer %T from the state machine", resp))
		return
	}
	out := make([]*structs.Job, len(jobs))
	for i, j := range jobs {
		out[i] = redact(identityOf(r), j, false)
	}
	writeJSON(w, http.StatusOK, out)
}
