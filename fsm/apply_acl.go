package fsm

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/skein-dev/skein/structs"
)

// applyACLBootstrap turns ACLs on with the first admin token; a cluster is
// bootstrapped once. It returns a copy of the token.
func (s *state) applyACLBootstrap(l *raft.Log) any {
	var req structs.ACLBootstrapRequest
	decode(l, &req)
	if s.acl != nil {
		return fmt.Errorf("%w: on %s", ErrACLBootstrapped, s.acl.BootstrappedAt.Format("2006-01-02 15:04:05 MST"))
	}
	tok := req.Token
	if err := tok.Validate(); err != nil {
		return fmt.Errorf("%w: bootstrap token: %w", ErrInvalidRequest, err)
	}
	if tok.Role != structs.RoleAdmin {
		return fmt.Errorf("%w: the bootstrap token's role is %s, want admin", ErrInvalidRequest, tok.Role)
	}
	tok.Revoked, tok.RevokedAt = false, time.Time{}
	s.acl = &structs.ACLState{BootstrappedAt: req.At, BootstrapToken: tok.ID}
	s.aclTokens[tok.ID] = tok
	return &tok
}

// applyACLToken creates a token or revokes one, and returns a copy of it.
// Revoking a revoked token changes nothing and is not an error.
func (s *state) applyACLToken(l *raft.Log) any {
	var req structs.ACLTokenRequest
	decode(l, &req)
	if s.acl == nil {
		return ErrNoACL
	}
	if req.Revoke {
		tok, ok := s.aclTokens[req.Token.ID]
		if !ok {
			return fmt.Errorf("%w: %s", ErrACLTokenNotFound, req.Token.ID)
		}
		if !tok.Revoked {
			tok.Revoked, tok.RevokedAt = true, req.At
			s.aclTokens[tok.ID] = tok
		}
		return &tok
	}
	tok := req.Token
	if err := tok.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if hasKey(s.aclTokens, tok.ID) {
		return fmt.Errorf("%w: %s", ErrACLTokenExists, tok.ID)
	}
	if len(s.aclTokens) >= structs.MaxACLTokens {
		return fmt.Errorf("%w: the cluster keeps at most %d ACL tokens", ErrLimit, structs.MaxACLTokens)
	}
	tok.Revoked, tok.RevokedAt = false, time.Time{}
	s.aclTokens[tok.ID] = tok
	return &tok
}

// applyACLUser sets what admins allow one user, and returns a copy.
func (s *state) applyACLUser(l *raft.Log) any {
	var req structs.ACLUserRequest
	decode(l, &req)
	if s.acl == nil {
		return ErrNoACL
	}
	u := req.User
	if err := structs.ValidateUserName(u.Name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if _, ok := s.aclUsers[u.Name]; !ok && len(s.aclUsers) >= structs.MaxLimitUsers {
		return fmt.Errorf("%w: the cluster keeps settings for at most %d users", ErrLimit, structs.MaxLimitUsers)
	}
	s.aclUsers[u.Name] = u
	return &u
}
