package server

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// Routes of the users' limits: GET /v1/limits and GET /v1/limits/{user}
// are reads (role reader), POST /v1/limits is an admin's write.

// handleLimits answers the cluster's limits, the defaults and every user
// that has limits of its own or holds something.
func (s *Server) handleLimits(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.limitsInfo())
}

// handleUserLimits answers one user's limits and usage.
func (s *Server) handleUserLimits(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if err := structs.ValidateUserName(user); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, userLimitsInfo(s.fsm.Limits(), user, s.fsm.LimitUsage(user)))
}

// handleLimitsSet changes a user's limits, the defaults or the cluster's; a
// write, so it is served by the leader.
func (s *Server) handleLimitsSet(w http.ResponseWriter, r *http.Request) {
	var req structs.LimitsSetRequest
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, &req)
	}
	if err == nil {
		err = req.Validate()
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	resp, err := s.cfg.Apply(structs.LimitsSetType, req)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if _, ok := resp.(*structs.LimitTable); !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("limits: unexpected answer %T from the state machine", resp))
		return
	}
	writeJSON(w, http.StatusOK, s.limitsInfo())
}

// limitsInfo is the whole limits picture from the local state.
func (s *Server) limitsInfo() api.LimitsInfo {
	tab := s.fsm.Limits()
	usage, queued := s.fsm.LimitUsages()
	info := api.LimitsInfo{
		Cluster: api.ClusterLimitsInfo{MaxQueued: tab.ClusterMaxQueued(), Queued: queued},
		// The owner "" never has limits of its own (ValidateUserName):
		// it has the defaults.
		Default:    tab.For(""),
		DefaultSet: tab.Default,
		Users:      []api.UserLimitsInfo{},
	}
	users := maps.Clone(usage)
	for u := range tab.Users {
		users[u] = usage[u]
	}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		info.Users = append(info.Users, userLimitsInfo(tab, u, users[u]))
	}
	return info
}

func userLimitsInfo(tab *structs.LimitTable, user string, use fsm.LimitUsage) api.UserLimitsInfo {
	return api.UserLimitsInfo{User: user, Limits: tab.For(user), Set: tab.Users[user], Queued: use.Queued, GPUs: use.GPUs}
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
