package server

import (
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/structs"
)

// Routes of fair share's configuration: GET /v1/accounts is a read (role
// reader); POST /v1/accounts (the account tree, members, weights) and
// POST /v1/qos are an admin's writes. Each write answers the whole table.

// handleAccounts answers the account table: accounts, QoS, each user's
// default account and the priority weights in force.
func (s *Server) handleAccounts(w http.ResponseWriter, r *http.Request) {
	tab := s.fsm.FairShare().Accounts
	if tab.Weights == nil {
		w := tab.PriorityWeights()
		tab.Weights = &w
	}
	writeJSON(w, http.StatusOK, tab)
}

// handleAccountSet changes the account tree, a membership or the weights.
func (s *Server) handleAccountSet(w http.ResponseWriter, r *http.Request) {
	var req structs.AccountRequest
	s.tableWrite(w, r, &req, req.Validate, structs.AccountSetType)
}

// handleQoSSet creates, changes or deletes a QoS.
func (s *Server) handleQoSSet(w http.ResponseWriter, r *http.Request) {
	var req structs.QoSRequest
	s.tableWrite(w, r, &req, req.Validate, structs.QoSSetType)
}

// tableWrite decodes a request into req, checks it, commits it on the
// leader as message mt, and answers the account table.
func (s *Server) tableWrite(w http.ResponseWriter, r *http.Request, req any, validate func() error, mt structs.MessageType) {
	body, err := readBody(w, r)
	if err == nil {
		err = decodeStrict(body, req)
	}
	if err == nil {
		err = validate()
	}
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	resp, err := s.cfg.Apply(mt, req)
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if _, ok := resp.(*structs.AccountTable); !ok {
		writeError(w, http.StatusInternalServerError, fmt.Errorf("%s: unexpected answer %T from the state machine", mt, resp))
		return
	}
	s.handleAccounts(w, r)
}
