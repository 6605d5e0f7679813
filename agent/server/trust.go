package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
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
func (s *trustRoutes) trustOrFail(w http.ResponseWriter) *secure.Secure {
	if s.cfg.Trust == nil {
		writeError(w, http.StatusBadRequest, errPlaintext)
	}
	return s.cfg.Trust
}

// trustWrite serves a write of the trust API, refused in a plaintext
// cluster: it reads the body into req (nil: none), checks it with valid
// (nil: none), and has the leader do it (the request's Writer).
func (s *trustRoutes) trustWrite(w http.ResponseWriter, r *http.Request, req any, valid func() error, do func(*secure.Secure) (any, error)) {
	t := s.trustOrFail(w)
	if t == nil {
		return
	}
	s.write(w, r, req, bodyOptional, func(wr endpoint.Writer) (any, error) {
		if valid != nil {
			if err := valid(); err != nil {
				return nil, err
			}
		}
		return wr.Lead(nil, func() (any, error) { return do(t) })
	})
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
func (s *trustRoutes) handleCA(w http.ResponseWriter, r *http.Request) {
	if t := s.trustOrFail(w); t != nil {
		writeJSON(w, http.StatusOK, t.CA())
	}
}

func (s *trustRoutes) handleJoinTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.JoinTokenCreateRequest
	s.trustWrite(w, r, &req, nil, func(t *secure.Secure) (any, error) { return t.CreateJoinToken(req) })
}

func (s *trustRoutes) handleJoinTokens(w http.ResponseWriter, r *http.Request) {
	if t := s.trustOrFail(w); t != nil {
		tokens := t.JoinTokens()
		if tokens == nil {
			tokens = []api.JoinToken{}
		}
		writeJSON(w, http.StatusOK, tokens)
	}
}

func (s *trustRoutes) handleJoinTokenRevoke(w http.ResponseWriter, r *http.Request) {
	s.trustWrite(w, r, nil, nil, func(t *secure.Secure) (any, error) { return t.RevokeJoinToken(r.PathValue("id")) })
}

func (s *trustRoutes) handleKeyring(w http.ResponseWriter, r *http.Request) {
	if t := s.trustOrFail(w); t != nil {
		writeJSON(w, http.StatusOK, t.KeyringStatus())
	}
}

func (s *trustRoutes) handleKeyringRotate(w http.ResponseWriter, r *http.Request) {
	s.trustWrite(w, r, nil, nil, func(t *secure.Secure) (any, error) {
		if err := t.RotateKeyring(); err != nil {
			return nil, err
		}
		return t.KeyringStatus(), nil
	})
}

func (s *trustRoutes) handleNodeRevoke(w http.ResponseWriter, r *http.Request) {
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
	// The leader commits the revocation; the node the user asked waits
	// for the node to be cut off, as its own state and gossip show it.
	buf := &bufferWriter{header: http.Header{}, status: http.StatusOK}
	s.trustWrite(buf, r, &req, valid, func(t *secure.Secure) (any, error) {
		return api.NodeRevokeResult{NodeID: id}, t.RevokeNode(id, req.Reason)
	})
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
		res := s.cutOff(id)
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

// cutOff says how far cutting the revoked node id off has come: out of
// the Raft configuration; the keyring rotated without it (its revocation
// applied here, and the rotation it made due begun and over, entries that
// come after it); no member of this node's gossip holding it alive.
func (s *trustRoutes) cutOff(id string) api.NodeRevokeResult {
	res := api.NodeRevokeResult{NodeID: id, OutOfRaft: true, Refused: true}
	var waiting []string
	if servers, err := s.cfg.Raft.Servers(); err != nil || slices.ContainsFunc(servers, func(sv cluster.RaftServer) bool { return sv.ID == id }) {
		res.OutOfRaft = false
		waiting = append(waiting, "its removal from Raft")
	}
	t, _ := s.fsm.Trust()
	res.KeyringGeneration = t.Keyring.Generation
	res.Rotated = s.fsm.Revoked(id) && !t.KeyringDue && !t.Keyring.Rotating()
	if !res.Rotated {
		waiting = append(waiting, fmt.Sprintf("the keyring's rotation without it (at generation %d)", t.Keyring.Generation))
	}
	if s.cfg.Peers != nil && slices.ContainsFunc(s.cfg.Peers.Members(), func(m api.Member) bool {
		return m.ID == id && m.Status == cluster.StatusAlive.String()
	}) {
		res.Refused = false
		waiting = append(waiting, "its refusal in gossip")
	}
	res.Done = len(waiting) == 0
	res.Waiting = strings.Join(waiting, ", ")
	return res
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
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, api.RenewResponse{Cert: string(cert)})
}

// handleCAKey takes the CA key from the leader, before this node's
// promotion to voter.
func (s *trustRoutes) handleCAKey(w http.ResponseWriter, r *http.Request) {
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
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}
