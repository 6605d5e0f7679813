package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// Routes of fair share's views, both reads: GET /v1/share (the fair tree,
// sshare) and GET /v1/prio (the queue's factors, sprio), which
// endpoint.Queue computes as a scheduling pass would, from this node's
// state at the time of the request.

// maxPrioJobs bounds the jobs GET /v1/prio answers.
const maxPrioJobs = 50000

func (s *jobRoutes) handleShare(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.queue.Share())
}

func (s *jobRoutes) handlePrio(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := maxPrioJobs
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPrioJobs {
			writeError(w, http.StatusBadRequest, &structs.FieldError{Field: "limit", Msg: fmt.Sprintf("%q is out of range 1..%d", v, maxPrioJobs)})
			return
		}
		limit = n
	}
	owner, byOwner := q.Get("owner"), q.Has("owner")
	writeJSON(w, http.StatusOK, s.queue.Priorities(now(), limit, func(p *api.JobPriority) bool { return !byOwner || p.Owner == owner }))
}
