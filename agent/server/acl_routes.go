package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// The ACL API (api/acl.go): bootstrap, who the caller is, tokens and users.
// Tokens are made by the node that commits them, the leader, which answers
// the token once; the state keeps only its hash.

func (s *Server) handleACLBootstrap(w http.ResponseWriter, r *http.Request) {
	var req api.ACLBootstrapRequest
	valid := func() error {
		if req.User == "" {
			req.User = api.DefaultBootstrapUser
		}
		return structs.ValidateUserName(req.User)
	}
	s.leaderWrite(w, r, &req, valid, statusOf, func() (any, error) {
		at := now()
		tok, rec, err := newACLToken(req.User, structs.RoleAdmin, "", "the bootstrap token", at, 0)
		if err != nil {
			return nil, err
		}
		return s.commitToken(structs.ACLBootstrapType, structs.ACLBootstrapRequest{Token: rec, At: at}, tok, at)
	})
}

func (s *Server) handleWhoAmI(w http.ResponseWriter, r *http.Request) {
	id := identityOf(r)
	out := api.WhoAmI{ACL: id.ACL, User: id.User, Role: id.Role, TokenID: id.TokenID, Permissions: []structs.Permission{}}
	for _, p := range structs.Permissions {
		if id.Can(p) {
			out.Permissions = append(out.Permissions, p)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleACLTokenCreate(w http.ResponseWriter, r *http.Request) {
	var req api.ACLTokenCreateRequest
	valid := func() error {
		if err := structs.ValidateUserName(req.User); err != nil {
			return err
		}
		if _, err := structs.ParseRole(string(req.Role)); err != nil {
			return err
		}
		if ttl := time.Duration(req.TTL); ttl < 0 || ttl > structs.MaxACLTokenTTL {
			return &structs.FieldError{Field: "ttl", Msg: fmt.Sprintf("%s is out of range 0 (never expires)..%s", ttl, structs.MaxACLTokenTTL)}
		}
		if len(req.Description) > structs.MaxDescriptionLen {
			return &structs.FieldError{Field: "description", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Description), structs.MaxDescriptionLen)}
		}
		return nil
	}
	s.leaderWrite(w, r, &req, valid, statusOf, func() (any, error) {
		at := now()
		tok, rec, err := newACLToken(req.User, req.Role, identityOf(r).User, req.Description, at, time.Duration(req.TTL))
		if err != nil {
			return nil, err
		}
		return s.commitToken(structs.ACLTokenType, structs.ACLTokenRequest{Token: rec, At: at}, tok, at)
	})
}

// newACLToken makes a token and the record the cluster keeps of it.
func newACLToken(user string, role structs.Role, by, desc string, at time.Time, ttl time.Duration) (trust.ACLToken, structs.ACLToken, error) {
	tok, err := trust.NewACLToken()
	if err != nil {
		return tok, structs.ACLToken{}, err
	}
	rec := structs.ACLToken{ID: tok.ID, SecretHash: trust.HashSecret(tok.Secret), User: user, Role: role,
		CreatedBy: by, Description: desc, CreatedAt: at}
	if ttl > 0 {
		rec.ExpiresAt = at.Add(ttl)
	}
	return tok, rec, nil
}

// commitToken applies a bootstrap or token entry and answers the token.
func (s *Server) commitToken(typ structs.MessageType, req any, tok trust.ACLToken, at time.Time) (any, error) {
	resp, err := s.cfg.Apply(typ, req)
	if err != nil {
		return nil, err
	}
	rec, ok := resp.(*structs.ACLToken)
	if !ok {
		return nil, fmt.Errorf("acl token: unexpected answer %T from the state machine", resp)
	}
	return api.ACLTokenCreated{Token: tok.String(), Info: api.TokenInfo(rec, at)}, nil
}

func (s *Server) handleACLTokens(w http.ResponseWriter, r *http.Request) {
	at := now()
	out := []api.ACLTokenInfo{}
	for _, t := range s.fsm.ACLTokens() {
		out = append(out, api.TokenInfo(&t, at))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleACLTokenRevoke(w http.ResponseWriter, r *http.Request) {
	id, err := s.findACLToken(r.PathValue("id"))
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	s.leaderWrite(w, r, nil, nil, statusOf, func() (any, error) {
		at := now()
		resp, err := s.cfg.Apply(structs.ACLTokenType, structs.ACLTokenRequest{Token: structs.ACLToken{ID: id}, Revoke: true, At: at})
		if err != nil {
			return nil, err
		}
		rec, ok := resp.(*structs.ACLToken)
		if !ok {
			return nil, fmt.Errorf("acl token: unexpected answer %T from the state machine", resp)
		}
		return api.TokenInfo(rec, at), nil
	})
}

// findACLToken resolves a token ID or unique ID prefix.
func (s *Server) findACLToken(prefix string) (string, error) {
	if prefix == "" {
		return "", &structs.FieldError{Field: "id", Msg: "empty"}
	}
	var found []string
	for _, t := range s.fsm.ACLTokens() {
		if strings.HasPrefix(t.ID, prefix) {
			found = append(found, t.ID)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w: %q", fsm.ErrACLTokenNotFound, prefix)
	case 1:
		return found[0], nil
	}
	return "", &structs.FieldError{Field: "id", Msg: fmt.Sprintf("%q names %d tokens; give more of the ID", prefix, len(found))}
}

func (s *Server) handleACLUsers(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.fsm.ACLUsers())
}

func (s *Server) handleACLUserSet(w http.ResponseWriter, r *http.Request) {
	var req api.ACLUserSetRequest
	valid := func() error { return structs.ValidateUserName(req.User) }
	s.leaderWrite(w, r, &req, valid, statusOf, func() (any, error) {
		u := structs.ACLUser{Name: req.User, AllowRoot: req.AllowRoot, UpdatedAt: now(), UpdatedBy: identityOf(r).User}
		return s.cfg.Apply(structs.ACLUserType, structs.ACLUserRequest{User: u})
	})
}
