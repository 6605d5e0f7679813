package secure

import (
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// The leader's side of admission: join tokens, admitting nodes, renewing
// their certificates.

// now is the leader's clock, stamped into the entries it commits.
func now() time.Time { return time.Now().UTC() }

// Admit admits a node with a join token: it checks the token against the
// replicated state (a wrong secret costs no log entry), signs the node's
// CSR, commits the admission (which counts the token's use once,
// cluster-wide) and answers what the node needs to take part. This node
// must lead.
func (s *Secure) Admit(req api.AdmitRequest) (*api.AdmitResponse, error) {
	tok, err := trust.ParseJoinToken(req.Token)
	if err != nil {
		return nil, fmt.Errorf("%w: token: %w", ErrInvalid, err)
	}
	t, ok := s.cfg.FSM.Trust()
	if !ok {
		return nil, ErrNoTrust
	}
	if fp := s.CAFingerprint(); tok.CAFingerprint != fp {
		return nil, fmt.Errorf("%w: the join token is for another cluster (its CA is %s, this one's %s)", ErrForbidden, tok.CAFingerprint, fp)
	}
	ca := s.ca.Load()
	if ca == nil {
		return nil, ErrNoCAKey
	}
	admission := structs.NodeAdmitRequest{TokenID: tok.ID, SecretHash: trust.HashSecret(tok.Secret),
		NodeID: req.NodeID, Name: req.Name, At: now()}
	if err := s.cfg.FSM.CheckAdmit(admission); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrForbidden, err)
	}
	if len(req.Name) > structs.MaxNameLen {
		return nil, fmt.Errorf("%w: name: longer than %d characters", ErrInvalid, structs.MaxNameLen)
	}
	cert, err := ca.SignNode([]byte(req.CSR), req.NodeID, s.cfg.CertTTL, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: csr: %w", ErrInvalid, err)
	}
	if _, err := s.cfg.Apply(structs.NodeAdmitType, admission); err != nil {
		if isDomain(err) {
			return nil, fmt.Errorf("%w: %w", ErrForbidden, err)
		}
		return nil, err
	}
	s.log.Info("admitted a node", "node", req.Name, "id", structs.ShortID(req.NodeID), "token", tok.ID)
	var gossip []string
	for _, m := range s.dep().Raft.Members() {
		if m.Status == cluster.StatusAlive {
			gossip = append(gossip, m.Addr)
		}
	}
	return &api.AdmitResponse{Cert: string(cert), CACerts: t.CACerts, Keyring: t.Keyring, GossipAddrs: gossip}, nil
}

// isDomain reports whether err is the FSM refusing an admission.
func isDomain(err error) bool {
	for _, e := range []error{fsm.ErrJoinTokenNotFound, fsm.ErrJoinTokenRevoked, fsm.ErrJoinTokenExpired,
		fsm.ErrJoinTokenUsedUp, fsm.ErrJoinTokenSecret, fsm.ErrNodeAdmitted, fsm.ErrNodeRevoked} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Renew signs a new certificate for a node that holds a valid one, for the
// node ID that one names. This node must lead.
func (s *Secure) Renew(nodeID string, csr []byte) ([]byte, error) {
	if !s.cfg.FSM.Admitted(nodeID) {
		return nil, fmt.Errorf("%w: node %s is not admitted", ErrForbidden, structs.ShortID(nodeID))
	}
	ca := s.ca.Load()
	if ca == nil {
		return nil, ErrNoCAKey
	}
	cert, err := ca.SignNode(csr, nodeID, s.cfg.CertTTL, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%w: csr: %w", ErrInvalid, err)
	}
	return cert, nil
}

// CreateJoinToken makes a join token and commits its hash. The token is
// returned once; the cluster keeps only the hash. This node must lead.
func (s *Secure) CreateJoinToken(req api.JoinTokenCreateRequest) (*api.JoinTokenCreated, error) {
	ttl := time.Duration(req.TTL)
	switch {
	case ttl == 0:
		ttl = api.DefaultJoinTokenTTL
	case ttl < 0 || ttl > api.MaxJoinTokenTTL:
		return nil, fmt.Errorf("%w: ttl %s: out of range 1s..%s", ErrInvalid, ttl, api.MaxJoinTokenTTL)
	}
	if req.Uses < 0 || req.Uses > api.MaxJoinTokenUses {
		return nil, fmt.Errorf("%w: uses %d: out of range 0..%d", ErrInvalid, req.Uses, api.MaxJoinTokenUses)
	}
	if len(req.Description) > structs.MaxNameLen {
		return nil, fmt.Errorf("%w: description: longer than %d characters", ErrInvalid, structs.MaxNameLen)
	}
	if _, ok := s.cfg.FSM.Trust(); !ok {
		return nil, ErrNoTrust
	}
	tok, err := trust.NewJoinToken(s.CAFingerprint())
	if err != nil {
		return nil, err
	}
	at := now()
	rec := structs.JoinToken{ID: tok.ID, SecretHash: trust.HashSecret(tok.Secret), CreatedAt: at,
		ExpiresAt: at.Add(ttl), MaxUses: req.Uses, Description: req.Description}
	if _, err := s.cfg.Apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: rec, At: at}); err != nil {
		return nil, err
	}
	return &api.JoinTokenCreated{Token: tok.String(), Info: TokenInfo(rec, at)}, nil
}

// RevokeJoinToken revokes a join token by ID. This node must lead.
func (s *Secure) RevokeJoinToken(id string) (*api.JoinToken, error) {
	at := now()
	if _, err := s.cfg.Apply(structs.JoinTokenType, structs.JoinTokenRequest{Token: structs.JoinToken{ID: id}, Revoke: true, At: at}); err != nil {
		return nil, err
	}
	rec, _ := s.cfg.FSM.JoinToken(id)
	info := TokenInfo(rec, at)
	return &info, nil
}

// TokenInfo is a join token as users see it: without its secret.
func TokenInfo(t structs.JoinToken, at time.Time) api.JoinToken {
	state := "active"
	switch {
	case t.Revoked:
		state = "revoked"
	case !at.Before(t.ExpiresAt):
		state = "expired"
	case t.MaxUses > 0 && t.Uses >= t.MaxUses:
		state = "used_up"
	}
	return api.JoinToken{ID: t.ID, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, MaxUses: t.MaxUses,
		Uses: t.Uses, Description: t.Description, Revoked: t.Revoked, State: state}
}

// JoinTokens lists the join tokens, without secrets.
func (s *Secure) JoinTokens() []api.JoinToken {
	at := now()
	var out []api.JoinToken
	for _, t := range s.cfg.FSM.JoinTokens() {
		out = append(out, TokenInfo(t, at))
	}
	return out
}

// RevokeNode revokes a node's admission. Every node refuses its
// certificate from the moment the entry is applied; the entry also makes a
// keyring rotation due, which whichever node leads carries out, so that
// the node, which still knows the gossip key, is cut off gossip too. A
// leader may revoke itself: the others then refuse it and elect another.
// This node must lead.
func (s *Secure) RevokeNode(nodeID, reason string) error {
	if _, err := s.cfg.Apply(structs.NodeRevokeType, structs.NodeRevokeRequest{NodeID: nodeID, Reason: reason, At: now()}); err != nil {
		return err
	}
	s.log.Warn("revoked a node", "id", structs.ShortID(nodeID), "reason", reason)
	return nil
}

// CA is the cluster CA's bundle as GET /v1/ca answers it.
func (s *Secure) CA() api.CA {
	var certs []string
	for rest := s.bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		certs = append(certs, string(pem.EncodeToMemory(block)))
	}
	return api.CA{CACerts: certs, Fingerprint: s.CAFingerprint()}
}
