package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// Routes of the users' limits: GET /v1/limits and GET /v1/limits/{user}
// are reads (role reader), POST /v1/limits is an admin's write.

// handleLimits answers the cluster's limits, the defaults and every user
// that has limits of its own or holds something.
func (s *adminRoutes) handleLimits(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.policy.Limits())
}

// handleUserLimits answers one user's limits and usage.
func (s *adminRoutes) handleUserLimits(w http.ResponseWriter, r *http.Request) {
	info, err := s.policy.UserLimits(r.PathValue("user"))
	answer(w, http.StatusOK, info, err)
}

// handleLimitsSet changes a user's limits, the defaults or the cluster's.
func (s *adminRoutes) handleLimitsSet(w http.ResponseWriter, r *http.Request) {
	var req structs.LimitsSetRequest
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) { return s.policy.SetLimits(wr, req) })
}

// pageLimit reads the limit parameter of a paged listing.
func pageLimit(v string) (int, error) {
	if v == "" {
		return api.DefaultJobsPage, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > api.MaxJobsPage {
		return 0, &structs.FieldError{Field: "limit", Msg: fmt.Sprintf("%q is out of range 1..%d", v, api.MaxJobsPage)}
	}
	return n, nil
}
