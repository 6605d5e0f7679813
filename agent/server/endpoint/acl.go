package endpoint

import (
	"fmt"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// ACLState is what the ACL endpoints read of the state (fsm.FSM).
type ACLState interface {
	ACLTokens() []structs.ACLToken
	ACLUsers() []structs.ACLUser
}

// ACL bootstraps the cluster's ACLs and manages tokens and users (api/acl.go).
// Tokens are made by the node that commits them, the leader, which
// answers the token once; the state keeps only its hash.
type ACL struct {
	State ACLState
}

// WhoAmI is who the caller is and what it may do.
func WhoAmI(id Identity) api.WhoAmI {
	out := api.WhoAmI{ACL: id.ACL, User: id.User, Role: id.Role, TokenID: id.TokenID, Permissions: []structs.Permission{}}
	for _, p := range structs.Permissions {
		if id.Can(p) {
			out.Permissions = append(out.Permissions, p)
		}
	}
	return out
}

// Bootstrap turns the cluster's ACLs on, with an admin token for
// req.User (api.DefaultBootstrapUser when none is given).
func (a ACL) Bootstrap(w Writer, req api.ACLBootstrapRequest) (api.ACLTokenCreated, error) {
	if req.User == "" {
		req.User = api.DefaultBootstrapUser
	}
	if err := structs.ValidateUserName(req.User); err != nil {
		return api.ACLTokenCreated{}, err
	}
	return a.commitToken(w, structs.ACLBootstrapType, req.User, structs.RoleAdmin, "", "the bootstrap token", 0,
		func(rec structs.ACLToken, at time.Time) any { return structs.ACLBootstrapRequest{Token: rec, At: at} })
}

// CreateToken makes a token of a role for a user, made by the caller.
func (a ACL) CreateToken(w Writer, id Identity, req api.ACLTokenCreateRequest) (api.ACLTokenCreated, error) {
	if err := structs.ValidateUserName(req.User); err != nil {
		return api.ACLTokenCreated{}, err
	}
	if _, err := structs.ParseRole(string(req.Role)); err != nil {
		return api.ACLTokenCreated{}, err
	}
	if ttl := time.Duration(req.TTL); ttl < 0 || ttl > structs.MaxACLTokenTTL {
		return api.ACLTokenCreated{}, &structs.FieldError{Field: "ttl", Msg: fmt.Sprintf("%s is out of range 0 (never expires)..%s", ttl, structs.MaxACLTokenTTL)}
	}
	if len(req.Description) > structs.MaxDescriptionLen {
		return api.ACLTokenCreated{}, &structs.FieldError{Field: "description", Msg: fmt.Sprintf("%d bytes; at most %d", len(req.Description), structs.MaxDescriptionLen)}
	}
	return a.commitToken(w, structs.ACLTokenType, req.User, req.Role, id.User, req.Description, time.Duration(req.TTL),
		func(rec structs.ACLToken, at time.Time) any { return structs.ACLTokenRequest{Token: rec, At: at} })
}

// commitToken has the leader make a token (of user and role, made by
// by, described by desc, expiring ttl after it is made; 0: never) and
// commit its record in the entry of type typ that entry makes, and
// answers the token, once.
func (a ACL) commitToken(w Writer, typ structs.MessageType, user string, role structs.Role, by, desc string, ttl time.Duration,
	entry func(rec structs.ACLToken, at time.Time) any) (api.ACLTokenCreated, error) {
	var tok trust.ACLToken
	var at time.Time
	resp, err := w.Write(typ, nil, func() (any, error) {
		at = now()
		var rec structs.ACLToken
		var err error
		if tok, rec, err = newACLToken(user, role, by, desc, at, ttl); err != nil {
			return nil, err
		}
		return entry(rec, at), nil
	})
	if err != nil {
		return api.ACLTokenCreated{}, err
	}
	rec, ok := resp.(*structs.ACLToken)
	if !ok {
		return api.ACLTokenCreated{}, fmt.Errorf("acl token: unexpected answer %T from the state machine", resp)
	}
	return api.ACLTokenCreated{Token: tok.String(), Info: api.TokenInfo(rec, at)}, nil
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

// Tokens lists every token, never its secret.
func (a ACL) Tokens() []api.ACLTokenInfo {
	at := now()
	out := []api.ACLTokenInfo{}
	for _, t := range a.State.ACLTokens() {
		out = append(out, api.TokenInfo(&t, at))
	}
	return out
}

// RevokeToken revokes the token ref names (its ID or a unique prefix).
func (a ACL) RevokeToken(w Writer, ref string) (api.ACLTokenInfo, error) {
	id, err := a.findToken(ref)
	if err != nil {
		return api.ACLTokenInfo{}, err
	}
	var at time.Time
	resp, err := w.Write(structs.ACLTokenType, nil, func() (any, error) {
		at = now()
		return structs.ACLTokenRequest{Token: structs.ACLToken{ID: id}, Revoke: true, At: at}, nil
	})
	if err != nil {
		return api.ACLTokenInfo{}, err
	}
	rec, ok := resp.(*structs.ACLToken)
	if !ok {
		return api.ACLTokenInfo{}, fmt.Errorf("acl token: unexpected answer %T from the state machine", resp)
	}
	return api.TokenInfo(rec, at), nil
}

// findToken resolves a token ID or unique ID prefix.
func (a ACL) findToken(prefix string) (string, error) {
	if prefix == "" {
		return "", &structs.FieldError{Field: "id", Msg: "empty"}
	}
	var found []string
	for _, t := range a.State.ACLTokens() {
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

// Users lists the users with settings of their own.
func (a ACL) Users() []structs.ACLUser { return a.State.ACLUsers() }

// SetUser sets what a user may (run as root), recording the caller as
// who changed it; it answers what the state machine does.
func (a ACL) SetUser(w Writer, id Identity, req api.ACLUserSetRequest) (any, error) {
	if err := structs.ValidateUserName(req.User); err != nil {
		return nil, err
	}
	return w.Write(structs.ACLUserType, nil, func() (any, error) {
		u := structs.ACLUser{Name: req.User, AllowRoot: req.AllowRoot, UpdatedAt: now(), UpdatedBy: id.User}
		return structs.ACLUserRequest{User: u}, nil
	})
}
