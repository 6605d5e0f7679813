package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/structs"
	"github.com/skein-dev/skein/trust"
)

// Identity is who a user request comes from (the endpoints take it as
// it is).
type Identity = endpoint.Identity

// identityKey is the context key of a user request's Identity.
type identityKey struct{}

// identityOf is the Identity the user authenticator put in r's context. A
// request that never passed one (a test's bare handler) has no role and
// may do nothing.
func identityOf(r *http.Request) Identity {
	id, _ := r.Context().Value(identityKey{}).(Identity)
	return id
}

func withIdentity(r *http.Request, id Identity) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
}

// Errors of ACL authentication. None quotes the token.
var (
	errACLTokenNeeded  = errors.New("this cluster has ACLs: its API token no longer works for users; use an ACL token (skein acl token create), in --token-file or SKEIN_TOKEN_FILE")
	errACLTokenUnknown = errors.New("unknown ACL token")
	errACLTokenRevoked = errors.New("ACL token revoked")
	errACLTokenExpired = errors.New("ACL token expired")
	errACLNotYet       = errors.New("this node has no ACLs: the cluster has not been bootstrapped (skein acl bootstrap), or this node has not caught up yet; try again")
)

// tokenWait bounds how long a node waits for a token it does not know:
// one the leader has just made, acknowledged once a majority had it, may
// still be a heartbeat away from this node. A token that never comes (a
// wrong one) is refused after it, which also slows guessing.
const tokenWait = 500 * time.Millisecond

// aclWait bounds how long a node without ACLs waits for the bootstrap when
// asked with an ACL token: one made through another node, or just now.
const aclWait = 2 * time.Second

// ACLAuth authenticates users by ACL token once the cluster has ACLs, and
// with Legacy (the cluster's API token) before, when the caller holds every
// permission. The token is checked against the replicated state on every
// request, so a revocation holds on a node from the moment it applies the
// entry.
type ACLAuth struct {
	FSM    *fsm.FSM
	Legacy Authenticator
	// Now is the clock tokens expire by; nil is time.Now.
	Now func() time.Time
}

// Authenticate implements Authenticator.
func (a ACLAuth) Authenticate(r *http.Request) (*http.Request, error) {
	if _, on := a.FSM.ACL(); !on {
		r2, err := a.Legacy.Authenticate(r)
		switch {
		case err == nil:
			return withIdentity(r2, Identity{Role: structs.RoleAdmin}), nil
		case !trust.LooksLikeACLToken(requestToken(r)):
			return nil, err
		case !a.aclsOn(r.Context()):
			return nil, errACLNotYet
		}
	}
	raw := requestToken(r)
	if raw == "" || !trust.LooksLikeACLToken(raw) {
		return nil, errACLTokenNeeded
	}
	tok, err := trust.ParseACLToken(raw)
	if err != nil {
		return nil, err
	}
	rec, ok := a.token(r.Context(), tok.ID)
	if !ok || !trust.EqualHash(trust.HashSecret(tok.Secret), rec.SecretHash) {
		return nil, errACLTokenUnknown
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	switch {
	case rec.Revoked:
		return nil, errACLTokenRevoked
	case rec.Expired(now()):
		return nil, fmt.Errorf("%w on %s", errACLTokenExpired, rec.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return withIdentity(r, Identity{ACL: true, User: rec.User, Role: rec.Role, TokenID: rec.ID}), nil
}

// aclsOn says whether the cluster has ACLs, waiting up to aclWait for
// this node to apply the bootstrap (the caller holds an ACL token, so one
// was likely just made through another node).
func (a ACLAuth) aclsOn(ctx context.Context) bool {
	deadline := time.NewTimer(aclWait)
	defer deadline.Stop()
	for {
		_, changed := a.FSM.Watch()
		if _, on := a.FSM.ACL(); on {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// token finds the token with the ID id in the state, waiting up to
// tokenWait for this node to apply it (not at all for a quick check: a
// token from an address out of failures).
func (a ACLAuth) token(ctx context.Context, id string) (structs.ACLToken, bool) {
	if quickCheck(ctx) {
		return a.FSM.ACLToken(id)
	}
	deadline := time.NewTimer(tokenWait)
	defer deadline.Stop()
	for {
		_, changed := a.FSM.Watch()
		if rec, ok := a.FSM.ACLToken(id); ok {
			return rec, true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return structs.ACLToken{}, false
		case <-ctx.Done():
			return structs.ACLToken{}, false
		}
	}
}

// need serves h only to callers holding p; others get 403 naming it.
func need(p structs.Permission, what string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if id := identityOf(r); !id.Can(p) {
			writeError(w, http.StatusForbidden, &structs.PermissionError{Role: id.Role, Need: p, What: what})
			return
		}
		h(w, r)
	}
}

// mayActOn answers 403 and returns false unless the caller may act on job
// (what says how, for the message).
func mayActOn(w http.ResponseWriter, r *http.Request, job *structs.Job, what string) bool {
	if err := endpoint.CheckActFor(identityOf(r), job.Owner, what+" of another user's job"); err != nil {
		writeError(w, http.StatusForbidden, err)
		return false
	}
	return true
}
