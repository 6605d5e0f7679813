package server

import "net/http"

// leaderWrite serves a write that the leader carries out: it decodes the
// body into req (nil: no body is read), checks it with valid (nil: none),
// passes it to the leader from any other node, and answers what do
// returns, an error with the status status maps it to.
func (s *Server) leaderWrite(w http.ResponseWriter, r *http.Request, req any, valid func() error, status func(error) int, do func() (any, error)) {
	var body []byte
	if req != nil {
		var err error
		if body, err = readBody(w, r); err == nil && len(body) > 0 {
			err = decodeStrict(body, req)
		}
		if err == nil && valid != nil {
			err = valid()
		}
		if err != nil {
			writeError(w, statusOf(err), err)
			return
		}
	}
	if !s.cfg.Raft.IsLeader() && s.forward(w, r, body) {
		return
	}
	resp, err := do()
	if err != nil {
		writeError(w, status(err), err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
