package server

import (
	"net/http"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/structs"
)

// Routes of fair share's configuration: GET /v1/accounts is a read (role
// reader); POST /v1/accounts (the account tree, members, weights) and
// POST /v1/qos are an admin's writes (endpoint.Policy). Each write
// answers the whole table.

// handleAccounts answers the account table: accounts, QoS, each user's
// default account and the priority weights in force.
func (s *adminRoutes) handleAccounts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.policy.Accounts())
}

// handleAccountSet changes the account tree, a membership or the weights.
func (s *adminRoutes) handleAccountSet(w http.ResponseWriter, r *http.Request) {
	var req structs.AccountRequest
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) { return s.policy.SetAccounts(wr, &req) })
}

// handleQoSSet creates, changes or deletes a QoS.
func (s *adminRoutes) handleQoSSet(w http.ResponseWriter, r *http.Request) {
	var req structs.QoSRequest
	s.write(w, r, &req, bodyRequired, func(wr endpoint.Writer) (any, error) { return s.policy.SetQoS(wr, &req) })
}
