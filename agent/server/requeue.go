package server

import (
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
)

// handleRequeue puts a running batch job back in the queue (scontrol
// requeue; endpoint.Jobs.Requeue).
func (s *jobRoutes) handleRequeue(w http.ResponseWriter, r *http.Request) {
	s.write(w, r, nil, bodyRequired, func(wr endpoint.Writer) (any, error) {
		return s.jobs.Requeue(wr, identityOf(r), r.PathValue("id"))
	})
}
