package server

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
)

// The trust API of a secure cluster (docs/architecture.md, "Security
// model"): admission of joining
// nodes, join tokens, the CA, the gossip keyring and node revocation for
// users, and certificate renewal and the CA key hand-over between nodes.

// trustWrite serves a write of the trust API (endpoint.Trust): a
// plaintext cluster is refused before the body is read into req (nil:
// none), and do answers with the request's Writer.
func (s *trustRoutes) trustWrite(w http.ResponseWriter, r *http.Request, req any, do func(endpoint.Writer) (any, error)) {
	if err := s.trust.Secure(); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	s.write(w, r, req, bodyOptional, do)
}

// trustRead answers a read of the trust API.
func trustRead[T any](w http.ResponseWriter, read func() (T, error)) {
	v, err := read()
	answer(w, http.StatusOK, v, err)
}

// handleAdmit admits a node with a join token. It needs no API token: the
// join token is the credential. The leader signs; others forward.
// The node that took the request from the joining node records the
// admission, or its refusal, in the audit log.
func (s *trustRoutes) handleAdmit(w http.ResponseWriter, r *http.Request) {
	var req api.AdmitRequest
	cw := &captureWriter{ResponseWriter: w, status: http.StatusOK}
	// A refused join token (403) counts as a failed authentication.
	s.authFails.limit(cw, r, http.StatusForbidden, func(w http.ResponseWriter) {
		s.trustWrite(w, r, &req, func(wr endpoint.Writer) (any, error) { return s.trust.Admit(wr, req) })
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
func (s *trustRoutes) handleCA(w http.ResponseWriter, r *http.Request) {
	trustRead(w, s.trust.CA)
}

func (s *trustRoutes) handleJoinTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.JoinTokenCreateRequest
	s.trustWrite(w, r, &req, func(wr endpoint.Writer) (any, error) { return s.trust.CreateJoinToken(wr, req) })
}

func (s *trustRoutes) handleJoinTokens(w http.ResponseWriter, r *http.Request) {
	trustRead(w, s.trust.JoinTokens)
}

func (s *trustRoutes) handleJoinTokenRevoke(w http.ResponseWriter, r *http.Request) {
	s.trustWrite(w, r, nil, func(wr endpoint.Writer) (any, error) { return s.trust.RevokeJoinToken(wr, r.PathValue("id")) })
}

func (s *trustRoutes) handleKeyring(w http.ResponseWriter, r *http.Request) {
	trustRead(w, s.trust.Keyring)
}

func (s *trustRoutes) handleKeyringRotate(w http.ResponseWriter, r *http.Request) {
	s.trustWrite(w, r, nil, func(wr endpoint.Writer) (any, error) { return s.trust.RotateKeyring(wr) })
}

func (s *trustRoutes) handleNodeRevoke(w http.ResponseWriter, r *http.Request) {
	var req api.NodeRevokeRequest
	id := r.PathValue("id")
	// The leader commits the revocation; the node the user asked waits
	// for the node to be cut off, as its own state and gossip show it.
	buf := &bufferWriter{header: http.Header{}, status: http.StatusOK}
	s.trustWrite(buf, r, &req, func(wr endpoint.Writer) (any, error) { return s.trust.RevokeNode(wr, id, req) })
	if buf.status != http.StatusOK || r.Header.Get(api.ForwardedHeader) != "" {
		buf.copyTo(w)
		return
	}
	s.holdWrite(w)
	writeJSON(w, http.StatusOK, s.waitCutOff(r.Context(), id))
}

// revokeWait bounds how long a revocation's answer waits for the node to
// be cut off everywhere; past it the answer says what is still under way.
const revokeWait = 30 * time.Second

// waitCutOff waits, up to revokeWait, until the revoked node id is cut
// off as far as this node can tell (cutOff), and returns how far it came.
func (s *trustRoutes) waitCutOff(ctx context.Context, id string) api.NodeRevokeResult {
	deadline := time.NewTimer(revokeWait)
	defer deadline.Stop()
	for {
		_, changed := s.fsm.Watch()
		res := s.trust.CutOff(id)
		if res.Done {
			return res
		}
		select {
		case <-ctx.Done():
			return res
		case <-deadline.C:
			return res
		case <-changed:
		case <-time.After(200 * time.Millisecond): // Raft's configuration and gossip move without an entry
		}
	}
}

// bufferWriter holds an answer, to be sent as it is or replaced.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header         { return b.header }
func (b *bufferWriter) WriteHeader(code int)        { b.status = code }
func (b *bufferWriter) Write(p []byte) (int, error) { return b.body.Write(p) }

// copyTo sends the answer held.
func (b *bufferWriter) copyTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}

// handleRenew signs a new certificate for the calling node. Leader only.
func (s *trustRoutes) handleRenew(w http.ResponseWriter, r *http.Request) {
	if err := s.trust.Secure(); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	var req api.RenewRequest
	if !s.leaderRequest(w, r, &req) {
		return
	}
	resp, err := s.trust.Renew(callerNode(r), req)
	answer(w, http.StatusOK, resp, err)
}

// handleCAKey takes the CA key from the leader, before this node's
// promotion to voter.
func (s *trustRoutes) handleCAKey(w http.ResponseWriter, r *http.Request) {
	if err := s.trust.Secure(); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	var req api.CAKeyRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	err := s.trust.AcceptCAKey(callerNode(r), req)
	answer(w, http.StatusOK, struct{}{}, err)
}
