package fsm

import (
	"crypto/subtle"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyTrustInit creates the trust state of a secure cluster and admits
// its founder. It is refused once the cluster has one.
func (s *state) applyTrustInit(l *raft.Log) any {
	var req structs.TrustInitRequest
	decode(l, &req)
	if s.trust != nil {
		return fmt.Errorf("trust init: %w: founded by node %s at %s", ErrTrustInitialized,
			s.trust.Founder, s.trust.InitAt.Format(time.RFC3339))
	}
	if err := validateTrust(&req.Trust); err != nil {
		return fmt.Errorf("trust init: %w", err)
	}
	s.trust = &req.Trust
	s.viewTrustIndex = l.Index
	s.admissions[req.Trust.Founder] = structs.Admission{
		NodeID:     req.Trust.Founder,
		Name:       req.Name,
		AdmittedAt: req.Trust.InitAt,
	}
	return copyTrust(s.trust)
}

// validateTrust checks what every trust state holds: CA certificates, a
// keyring, a founder and the time it was created. Restore checks the same.
func validateTrust(t *structs.Trust) error {
	if len(t.CACerts) == 0 {
		return fmt.Errorf("%w: ca_certs is empty", ErrInvalidRequest)
	}
	for i, c := range t.CACerts {
		if c == "" {
			return fmt.Errorf("%w: ca_certs[%d] is empty", ErrInvalidRequest, i)
		}
	}
	if t.Keyring.Generation < 1 {
		return fmt.Errorf("%w: keyring.generation is 0, want at least 1", ErrInvalidRequest)
	}
	if err := validateKeyring(t.Keyring); err != nil {
		return err
	}
	if t.Founder == "" {
		return fmt.Errorf("%w: founder is empty", ErrInvalidRequest)
	}
	if t.InitAt.IsZero() {
		return fmt.Errorf("%w: init_at is not stamped", ErrInvalidRequest)
	}
	return nil
}

// validateKeyring checks that a keyring has a primary key and that no key
// is empty or listed twice.
func validateKeyring(k structs.Keyring) error {
	if k.Primary == "" {
		return fmt.Errorf("%w: keyring.primary is empty", ErrInvalidRequest)
	}
	if k.Next != "" && (k.Next == k.Primary || slices.Contains(k.Others, k.Next)) {
		return fmt.Errorf("%w: keyring.next repeats another key", ErrInvalidRequest)
	}
	for i, key := range k.Others {
		switch {
		case key == "":
			return fmt.Errorf("%w: keyring.others[%d] is empty", ErrInvalidRequest, i)
		case key == k.Primary:
			return fmt.Errorf("%w: keyring.others[%d] repeats the primary key", ErrInvalidRequest, i)
		case slices.Contains(k.Others[:i], key):
			return fmt.Errorf("%w: keyring.others[%d] repeats an earlier key", ErrInvalidRequest, i)
		}
	}
	return nil
}

// applyJoinToken creates a join token, or revokes one when req.Revoke is
// set. A revoked token stays in the state, so it is refused by name.
func (s *state) applyJoinToken(l *raft.Log) any {
	var req structs.JoinTokenRequest
	decode(l, &req)
	if req.Revoke {
		return s.revokeJoinToken(req.Token.ID, req.At)
	}
	tok := req.Token
	if err := s.checkNewJoinToken(&tok); err != nil {
		return err
	}
	s.joinTokens[tok.ID] = tok
	return &tok
}

// checkNewJoinToken says why a join token may not be created, or nil.
func (s *state) checkNewJoinToken(tok *structs.JoinToken) error {
	if s.trust == nil {
		return fmt.Errorf("join token: %w", ErrNoTrust)
	}
	if tok.ID == "" {
		return fmt.Errorf("join token: %w: id is empty", ErrInvalidRequest)
	}
	if _, ok := s.joinTokens[tok.ID]; ok {
		return fmt.Errorf("join token %s: %w", tok.ID, ErrJoinTokenExists)
	}
	switch {
	case tok.SecretHash == "":
		return fmt.Errorf("join token %s: %w: secret_hash is empty", tok.ID, ErrInvalidRequest)
	case tok.CreatedAt.IsZero():
		return fmt.Errorf("join token %s: %w: created_at is not stamped", tok.ID, ErrInvalidRequest)
	case !tok.ExpiresAt.After(tok.CreatedAt):
		return fmt.Errorf("join token %s: %w: expires_at %s is not after created_at %s", tok.ID, ErrInvalidRequest,
			tok.ExpiresAt.Format(time.RFC3339), tok.CreatedAt.Format(time.RFC3339))
	case tok.MaxUses < 0:
		return fmt.Errorf("join token %s: %w: max_uses %d is negative", tok.ID, ErrInvalidRequest, tok.MaxUses)
	case tok.Uses != 0:
		return fmt.Errorf("join token %s: %w: uses is %d, want 0", tok.ID, ErrInvalidRequest, tok.Uses)
	case tok.Revoked || !tok.RevokedAt.IsZero():
		return fmt.Errorf("join token %s: %w: created revoked", tok.ID, ErrInvalidRequest)
	}
	return nil
}

// revokeJoinToken marks a join token revoked at `at`. Revoking it again
// changes nothing: the first time is kept.
func (s *state) revokeJoinToken(id string, at time.Time) any {
	if at.IsZero() {
		return fmt.Errorf("join token %s: revoke: %w: at is not stamped", id, ErrInvalidRequest)
	}
	tok, ok := s.joinTokens[id]
	if !ok {
		return fmt.Errorf("join token %s: %w", id, ErrJoinTokenNotFound)
	}
	if !tok.Revoked {
		tok.Revoked, tok.RevokedAt = true, at
		s.joinTokens[id] = tok
	}
	return &tok
}

// applyNodeAdmit admits a node with a join token (checkAdmit) and counts
// the use against the token.
func (s *state) applyNodeAdmit(l *raft.Log) any {
	var req structs.NodeAdmitRequest
	decode(l, &req)
	tok, err := s.checkAdmit(&req)
	if err != nil {
		return err
	}
	tok.Uses++
	s.joinTokens[tok.ID] = tok
	a := structs.Admission{NodeID: req.NodeID, Name: req.Name, TokenID: tok.ID, AdmittedAt: req.At}
	s.admissions[a.NodeID] = a
	return &a
}

// checkAdmit says why a node may not be admitted, or returns the token that
// admits it (a copy). It is all of NodeAdmit's checks: Apply runs it before
// admitting, and the leader, through CheckAdmit, before committing. The
// secret is checked right after the token is found, so a caller without it
// learns nothing about the token or the node.
func (s *state) checkAdmit(req *structs.NodeAdmitRequest) (structs.JoinToken, error) {
	if s.trust == nil {
		return structs.JoinToken{}, fmt.Errorf("node admit: %w", ErrNoTrust)
	}
	switch {
	case req.NodeID == "":
		return structs.JoinToken{}, fmt.Errorf("node admit: %w: node_id is empty", ErrInvalidRequest)
	case req.At.IsZero():
		return structs.JoinToken{}, fmt.Errorf("node admit %s: %w: at is not stamped", req.NodeID, ErrInvalidRequest)
	}
	tok, ok := s.joinTokens[req.TokenID]
	if !ok {
		return structs.JoinToken{}, fmt.Errorf("join token %s: %w", req.TokenID, ErrJoinTokenNotFound)
	}
	if subtle.ConstantTimeCompare([]byte(req.SecretHash), []byte(tok.SecretHash)) != 1 {
		return structs.JoinToken{}, fmt.Errorf("join token %s: %w", tok.ID, ErrJoinTokenSecret)
	}
	switch {
	case tok.Revoked:
		return structs.JoinToken{}, fmt.Errorf("join token %s: %w at %s", tok.ID, ErrJoinTokenRevoked,
			tok.RevokedAt.Format(time.RFC3339))
	case !req.At.Before(tok.ExpiresAt):
		return structs.JoinToken{}, fmt.Errorf("join token %s: %w at %s", tok.ID, ErrJoinTokenExpired,
			tok.ExpiresAt.Format(time.RFC3339))
	case tok.MaxUses != 0 && tok.Uses >= tok.MaxUses:
		return structs.JoinToken{}, fmt.Errorf("join token %s: %w: it admitted %d of %d nodes", tok.ID, ErrJoinTokenUsedUp,
			tok.Uses, tok.MaxUses)
	}
	if a, ok := s.admissions[req.NodeID]; ok {
		if a.Revoked {
			return structs.JoinToken{}, fmt.Errorf("node %s: %w at %s", req.NodeID, ErrNodeRevoked, a.RevokedAt.Format(time.RFC3339))
		}
		return structs.JoinToken{}, fmt.Errorf("node %s: %w at %s", req.NodeID, ErrNodeAdmitted, a.AdmittedAt.Format(time.RFC3339))
	}
	return tok, nil
}

// applyNodeRevoke revokes a node's admission; the node stays listed so
// that its node ID is never admitted again. Any admitted node may be
// revoked, the founder too; revoking a revoked node changes nothing.
func (s *state) applyNodeRevoke(l *raft.Log) any {
	var req structs.NodeRevokeRequest
	decode(l, &req)
	switch {
	case req.NodeID == "":
		return fmt.Errorf("node revoke: %w: node_id is empty", ErrInvalidRequest)
	case req.At.IsZero():
		return fmt.Errorf("node revoke %s: %w: at is not stamped", req.NodeID, ErrInvalidRequest)
	}
	a, ok := s.admissions[req.NodeID]
	if !ok {
		return fmt.Errorf("node %s: %w", req.NodeID, ErrNodeNotAdmitted)
	}
	if !a.Revoked {
		a.Revoked, a.RevokedAt, a.Reason = true, req.At, req.Reason
		s.admissions[a.NodeID] = a
		s.viewTrustIndex = l.Index
		if s.trust != nil {
			s.trust.KeyringDue = true
		}
	}
	return &a
}

// applyKeyring replaces the gossip keyring with the next generation.
func (s *state) applyKeyring(l *raft.Log) any {
	var req structs.KeyringRequest
	decode(l, &req)
	if s.trust == nil {
		return fmt.Errorf("keyring: %w", ErrNoTrust)
	}
	if want := s.trust.Keyring.Generation + 1; req.Keyring.Generation != want {
		return fmt.Errorf("keyring: %w: generation %d, want %d", ErrKeyringGeneration, req.Keyring.Generation, want)
	}
	if err := validateKeyring(req.Keyring); err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	s.trust.Keyring = req.Keyring
	s.viewTrustIndex = l.Index
	if req.Keyring.Next != "" {
		s.trust.KeyringDue = false // the rotation a revocation asked for has begun
	}
	k := copyKeyring(s.trust.Keyring)
	return &k
}

// copyTrust returns a deep copy of a trust state.
func copyTrust(t *structs.Trust) *structs.Trust {
	c := *t
	c.CACerts = slices.Clone(t.CACerts)
	c.Keyring = copyKeyring(t.Keyring)
	return &c
}

// copyKeyring returns a keyring that shares nothing with k.
func copyKeyring(k structs.Keyring) structs.Keyring {
	k.Others = slices.Clone(k.Others)
	return k
}
