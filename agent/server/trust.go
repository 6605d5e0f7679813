package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
)

// The trust API of a secure cluster (docs/architecture.md, "Security
// model"): admission of joining
// nodes, join tokens, the CA, the gossip keyring and node revocation for
// users, and certificate renewal and the CA key hand-over between nodes.

// errPlaintext answers trust requests to a plaintext cluster.
var errPlaintext = errors.New("this cluster runs without TLS (dev mode, loopback or --insecure-cluster): it has no CA, join tokens or keyring")

// trustOrFail answers 400 when the cluster is plaintext.
func (s *Server) trustOrFail(w http.ResponseWriter) *secure.Secure {
	if s.cfg.Trust == nil {
		writeError(w, http.StatusBadRequest, errPlaintext)
	}
	return s.cfg.Trust
}

// trustStatus maps the trust errors on top of statusOf.
func trustStatus(err error) int {
	switch {
	case errors.Is(err, secure.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, secure.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, secure.ErrRotating):
		return http.StatusConflict
	case errors.Is(err, secure.ErrNoTrust), errors.Is(err, secure.ErrNoCAKey):
		return http.StatusServiceUnavailable
	}
	return statusOf(err)
}

// trustWrite serves a write of the trust API with leaderWrite, refused in
// a plaintext cluster.
func (s *Server) trustWrite(w http.ResponseWriter, r *http.Request, req any, valid func() error, do func(*secure.Secure) (any, error)) {
	t := s.trustOrFail(w)
	if t == nil {
		return
	}
	s.leaderWrite(w, r, req, valid, trustStatus, func() (any, error) { return do(t) })
}

// handleAdmit admits a node with a join token. It needs no API token: the
// join token is the credential. The leader signs; others forward.
// The node that took the request from the joining node records the
// admission, or its refusal, in the audit log.
func (s *Server) handleAdmit(w http.ResponseWriter, r *http.Request) {
	var req api.AdmitRequest
	cw := &captureWriter{ResponseWriter: w, status: http.StatusOK}
	// A refused join token (403) counts as a failed authentication.
	s.authFails.limit(cw, r, http.StatusForbidden, func(w http.ResponseWriter) {
		s.trustWrite(w, r, &req, nil, func(t *secure.Secure) (any, error) { return t.Admit(req) })
	})
	if s.forwardedByNode(r) || cw.status == http.StatusTooManyRequests {
		return
	}
	rec := requestRecord(r, api.AuditNodeAdmit, viaAPI, cw.status)
	rec.Remote = s.remoteOf(r)
	rec.Detail = fmt.Sprintf("node %s (%s)", clipDetail(req.Name), clipDetail(req.NodeID))
	if cw.status >= http.StatusBadRequest {
		rec.Event = api.AuditNodeRefused
		rec.Detail += ": " + clipDetail(cw.errorText())
	}
	s.record(rec)
}

// handleCA answers the CA bundle; it is public.
func (s *Server) handleCA(w http.ResponseWriter, r *http.Request) {
	if t := s.trustOrFail(w); t != nil {
		writeJSON(w, http.StatusOK, t.CA())
	}
}

func (s *Server) handleJoinTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.JoinTokenCreateRequest
	s.trustWrite(w, r, &req, nil, func(t *secure.Secure) (any, error) { return t.CreateJoinToken(req) })
}

func (s *Server) handleJoinTokens(w http.ResponseWriter, r *http.Request) {
	if t := s.trustOrFail(w); t != nil {
		tokens := t.JoinTokens()
		if tokens == nil {
			tokens = []api.JoinToken{}
		}
		writeJSON(w, http.StatusOK, tokens)
	}
}

func (s *Server) handleJoinTokenRevoke(w http.ResponseWriter, r *http.Request) {
	s.trustWrite(w, r, nil, nil, func(t *secure.Secure) (any, error) { return t.RevokeJoinToken(r.PathValue("id")) })
}

func (s *Server) handleKeyring(w http.ResponseWriter, r *http.Request) {
	if t := s.trustOrFail(w); t != nil {
		writeJSON(w, http.StatusOK, t.KeyringStatus())
	}
}

func (s *Server) handleKeyringRotate(w http.ResponseWriter, r *http.Request) {
	s.trustWrite(w, r, nil, nil, func(t *secure.Secure) (any, error) {
		if err := t.RotateKeyring(); err != nil {
			return nil, err
		}
		return t.KeyringStatus(), nil
	})
}

func (s *Server) handleNodeRevoke(w http.ResponseWriter, r *http.Request) {
	var req api.NodeRevokeRequest
	id := r.PathValue("id")
	valid := func() error {
		if len(req.Reason) > structs.MaxNameLen {
			return &structs.FieldError{Field: "reason", Msg: fmt.Sprintf("longer than %d characters", structs.MaxNameLen)}
		}
		if _, ok := s.fsm.Admission(id); !ok {
			return fmt.Errorf("%w: no admitted node with ID %q", fsm.ErrNodeNotAdmitted, id)
		}
		return nil
	}
	s.trustWrite(w, r, &req, valid, func(t *secure.Secure) (any, error) { return struct{}{}, t.RevokeNode(id, req.Reason) })
}

// handleRenew signs a new certificate for the calling node. Leader only.
func (s *Server) handleRenew(w http.ResponseWriter, r *http.Request) {
	t := s.trustOrFail(w)
	if t == nil {
		return
	}
	var req api.RenewRequest
	if !s.leaderRequest(w, r, &req) {
		return
	}
	cert, err := t.Renew(callerNode(r), []byte(req.CSR))
	if err != nil {
		writeError(w, trustStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, api.RenewResponse{Cert: string(cert)})
}

// handleCAKey takes the CA key from the leader, before this node's
// promotion to voter.
func (s *Server) handleCAKey(w http.ResponseWriter, r *http.Request) {
	t := s.trustOrFail(w)
	if t == nil {
		return
	}
	var req api.CAKeyRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	if err := t.AcceptCAKey(callerNode(r), []byte(req.Key)); err != nil {
		writeError(w, trustStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
