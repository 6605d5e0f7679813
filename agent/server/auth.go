package server

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/skein-dev/skein/api"
)

// Authenticator decides whether a request may reach a router: nil lets it
// through, an error is answered 401 with its text. Each API has its own, so
// users and nodes can be told apart.
type Authenticator interface {
	// Authenticate returns the request to serve (it may carry who the
	// caller is in its context), or an error.
	Authenticate(r *http.Request) (*http.Request, error)
}

// ErrUnauthenticated is the answer to a request without the right token.
var ErrUnauthenticated = errors.New("missing or wrong API token: set --token or SKEIN_TOKEN")

// TokenAuth accepts requests that carry its token, in the X-Skein-Token
// header or as a bearer token; an empty TokenAuth accepts every request.
type TokenAuth string

// Authenticate implements Authenticator.
func (t TokenAuth) Authenticate(r *http.Request) (*http.Request, error) {
	if t == "" {
		return r, nil
	}
	if subtle.ConstantTimeCompare([]byte(requestToken(r)), []byte(t)) != 1 {
		return nil, ErrUnauthenticated
	}
	return r, nil
}

// requestToken is the API token a request carries.
func requestToken(r *http.Request) string {
	if got := r.Header.Get(api.TokenHeader); got != "" {
		return got
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// guard serves next only to requests auth lets through; fails refuses
// clients and tokens that failed too often (429), and counts their
// failures; failed (nil: none) hears of each failure answered 401.
func guard(auth Authenticator, fails *failLimiter, failed func(*http.Request, error), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := fails.authenticate(auth, r)
		var retry *RetryError
		switch {
		case errors.As(err, &retry):
			tooMany(w, retry.Wait, retry.Msg)
			return
		case err != nil:
			if failed != nil {
				failed(r, err)
			}
			writeError(w, http.StatusUnauthorized, err)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// ErrNotANode answers node-to-node calls without a valid node certificate.
var ErrNotANode = errors.New("the node-to-node API takes a node certificate of this cluster, not an API token")

// errWrongNode answers a node that reports for another node's ID.
var errWrongNode = errors.New("a node certificate authorises reports for its own node ID only")

// callerKey is the context key of the node ID a node certificate names.
type callerKey struct{}

// NodeCertAuth accepts node-to-node calls that came over TLS with a
// certificate of the cluster naming a node that is not revoked. The TLS
// handshake checked the chain, and the revocation as of then; Check asks
// again on every request, so that a connection opened before the node was
// revoked (a kept-alive one carries its heartbeats and its view watch for
// as long as it lives) serves it nothing more once the revocation is known
// here. It records the node ID, so that a handler can refuse a report
// about any other node. API tokens are never looked at.
type NodeCertAuth struct {
	// NodeID returns the node a verified peer certificate names.
	NodeID func(*tls.ConnectionState) (string, error)
	// Check refuses a connection of a node revoked since its handshake
	// (nil: refuses none).
	Check func(*tls.ConnectionState) error
}

// Authenticate implements Authenticator.
func (a NodeCertAuth) Authenticate(r *http.Request) (*http.Request, error) {
	if r.TLS == nil {
		return nil, ErrNotANode
	}
	id, err := a.NodeID(r.TLS)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotANode, err)
	}
	if a.Check != nil {
		if err := a.Check(r.TLS); err != nil {
			return nil, fmt.Errorf("node certificate: %w", err)
		}
	}
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, id)), nil
}

// tagCaller tags the connection of each request whose node certificate
// names a node with that node's ID (TagConn), so that a revocation closes
// the connections the node keeps alive.
func tagCaller(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := callerNode(r); id != "" {
			TagConn(r.Context(), id)
		}
		next.ServeHTTP(w, r)
	})
}

// callerNode is the node ID the caller's certificate names; "" when the
// internal API runs on tokens (a plaintext cluster), where reports are
// not bound to a node.
func callerNode(r *http.Request) string {
	id, _ := r.Context().Value(callerKey{}).(string)
	return id
}

// reportsFor checks that the caller may report for nodeID: answers 403
// and returns false when a node certificate names another node.
func reportsFor(w http.ResponseWriter, r *http.Request, nodeID string) bool {
	if caller := callerNode(r); caller != "" && caller != nodeID {
		writeError(w, http.StatusForbidden, errWrongNode)
		return false
	}
	return true
}

// HashedTokenAuth accepts user requests whose token hashes to the one the
// cluster keeps (a secure cluster: nodes hold the hash, never the token).
// Hash returns the kept hash and false while there is none yet, when Hash
// falls back to Fallback.
type HashedTokenAuth struct {
	Hash     func() (string, bool)
	Sum      func(token string) string
	Fallback Authenticator
}

// Authenticate implements Authenticator.
func (a HashedTokenAuth) Authenticate(r *http.Request) (*http.Request, error) {
	want, ok := a.Hash()
	if !ok {
		return a.Fallback.Authenticate(r)
	}
	got := requestToken(r)
	if got == "" || subtle.ConstantTimeCompare([]byte(a.Sum(got)), []byte(want)) != 1 {
		return nil, ErrUnauthenticated
	}
	return r, nil
}

// DenyAuth refuses every request, saying why.
type DenyAuth string

// Authenticate implements Authenticator.
func (d DenyAuth) Authenticate(*http.Request) (*http.Request, error) {
	return nil, errors.New(string(d))
}
