package server

import (
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/structs"
)

// handleRequeue puts a running batch job back in the queue (scontrol
// requeue): its allocations stop, and it waits to be placed again,
// without using a restart. A queued job is answered as it is. Only the
// job's owner, or one who may act on any job, may.
func (s *Server) handleRequeue(w http.ResponseWriter, r *http.Request) {
	jobID, arrayID, ok := s.jobOrArray(w, r, "requeue")
	if !ok {
		return
	}
	if arrayID != "" {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: %s names an array: requeue its tasks one by one (ARRAY_INDEX)", errBadRequest, r.PathValue("id")))
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, nil) {
		return
	}
	resp, err := s.cfg.Apply(structs.JobRequeueType, structs.JobRequeueRequest{JobID: jobID, By: identityOf(r).User, At: now()})
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	job, ok := resp.(*structs.Job)
	if !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("requeue: unexpected answer %T from the state machine", resp))
		return
	}
	writeJSON(w, http.StatusOK, redact(identityOf(r), job, false))
}
