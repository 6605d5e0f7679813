package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/skein-dev/skein/api"
)

// A worker (a node outside the Raft configuration: agent/DESIGN.md,
// "Servers and workers") holds no copy of the state: only its own view (agent/node). It answers the node-to-
// node API and its own /metrics itself, and passes every other request
// (the user API, the web UI, admission, the CA) on to a server, which
// authenticates and answers it as if it had come to it: the caller may
// use any node.

// ProxiedHeader marks a request a worker passed on to a server; the node
// that gets it answers it itself, never passes it on again.
const ProxiedHeader = "X-Skein-Proxied"

// serverCheck is how long the answer to "is this node a server" is kept.
const serverCheck = time.Second

// errNoServerToAsk refuses a caller while a worker knows no server, or
// gets no answer from one, to check its credentials with.
var errNoServerToAsk = errors.New("this node holds no ACLs and no server answered whether it admits the credentials; try again or use another node")

// toServer serves next on a server and passes the request on to a server
// on a worker.
func (s *Server) toServer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A request passed on to this node is answered here whatever
		// its role: it is never passed on twice (a node that took itself
		// for a server a moment ago answers from what it has).
		if s.localOnly(r) || r.Header.Get(ProxiedHeader) != "" || s.isServer() {
			next.ServeHTTP(w, r)
			return
		}
		addr, err := s.cfg.Peers.ServerAddr()
		if err != nil {
			// No server known (a node not yet joined, or cut off): it
			// answers from what it has, as any node would.
			next.ServeHTTP(w, r)
			return
		}
		target, err := url.Parse(addr)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		if err := replayable(w, r); err != nil {
			writeError(w, statusOf(err), err)
			return
		}
		proxy := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
				pr.Out.Header.Set(ProxiedHeader, s.cfg.NodeName)
			},
			Transport:     &otherServerOnDialError{s: s, next: s.cfg.Peers.Streams().Transport},
			FlushInterval: -1, // followed logs and events stream as they come
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				writeError(w, http.StatusBadGateway, fmt.Errorf("pass the request on to a server: %w", err))
			},
		}
		s.holdWrite(w)
		proxy.ServeHTTP(w, r)
	})
}

// maxServerTries bounds the servers a worker tries for one request.
const maxServerTries = 3

// replayable reads a request's body, bounded as the API bounds bodies,
// so that it can be sent again to another server (GetBody).
func replayable(w http.ResponseWriter, r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return nil
}

// otherServerOnDialError sends a request a worker passes on again to
// another server when the one picked cannot be reached (nothing was sent
// to it): gossip takes a few seconds to declare a dead server failed.
type otherServerOnDialError struct {
	s    *Server
	next http.RoundTripper
}

func (t *otherServerOnDialError) RoundTrip(req *http.Request) (*http.Response, error) {
	tried := map[string]bool{}
	for try := 1; ; try++ {
		resp, err := t.next.RoundTrip(req)
		var op *net.OpError
		if err == nil || try == maxServerTries || !errors.As(err, &op) || op.Op != "dial" {
			return resp, err
		}
		tried[req.URL.Scheme+"://"+req.URL.Host] = true
		addr, aerr := t.s.cfg.Peers.ServerAddrExcept(tried)
		if aerr != nil {
			return resp, err
		}
		u, perr := url.Parse(addr)
		if perr != nil {
			return resp, err
		}
		next := req.Clone(req.Context())
		next.URL.Scheme, next.URL.Host, next.Host = u.Scheme, u.Host, ""
		if req.GetBody != nil {
			if next.Body, aerr = req.GetBody(); aerr != nil {
				return resp, err
			}
		}
		req = next
	}
}

// localOnly reports whether a request is this node's own to answer
// whatever its role: the node-to-node API, its metrics, and the commands
// to this agent itself (join, leave).
func (s *Server) localOnly(r *http.Request) bool {
	switch r.URL.Path {
	case "/metrics", "/v1/join", "/v1/leave":
		return true
	}
	return strings.HasPrefix(r.URL.Path, internalPrefix) || r.Header.Get(api.ForwardedHeader) != ""
}

// isServer is holdsState, asked at most once per serverCheck.
func (s *shared) isServer() bool {
	now := time.Now().UnixNano()
	if c := s.role.Load(); c != nil && now-c.at < int64(serverCheck) {
		return c.server
	}
	c := &roleCheck{server: s.holdsState(), at: now}
	s.role.Store(c)
	return c.server
}

// roleCheck is one answer of holdsState and when it was given.
type roleCheck struct {
	server bool
	at     int64 // unix nanoseconds
}

// askTimeout bounds asking a server whether it admits a caller.
const askTimeout = 5 * time.Second

// UserAuth admits users as the user API does on any node: a server with
// Config.UserAuth, a worker, which holds no ACLs, by asking a server
// whether it admits the caller's credentials (workerAuth), failures
// counted and limited as the API's (a caller refused for them gets a
// *RetryError). The ingress authenticates with it; a worker that knows no
// server admits nobody.
func (s *Server) UserAuth() Authenticator {
	return limitedAuth{fails: s.authFails, auth: workerAuth{s: s, strict: true}, failed: s.failedAt(viaIngress)}
}

// limitedAuth is auth within the limits of failed authentications; failed
// hears of each failure that is not a refusal for too many.
type limitedAuth struct {
	fails  *failLimiter
	auth   Authenticator
	failed func(*http.Request, error)
}

// Authenticate implements Authenticator.
func (a limitedAuth) Authenticate(r *http.Request) (*http.Request, error) {
	req, err := a.fails.authenticate(a.auth, r)
	var retry *RetryError
	if err != nil && !errors.As(err, &retry) {
		a.failed(r, err)
	}
	return req, err
}

// workerAuth is Config.UserAuth on a server and a server's answer on a
// worker. The guard of the routes a worker answers itself (its /metrics,
// join, leave) uses it not strict: a worker that knows no server answers
// from what it has, as toServer does. No answer is kept: a revoked
// token stops working on a worker when it stops on the server asked.
type workerAuth struct {
	s      *Server
	strict bool
}

// Authenticate implements Authenticator.
func (a workerAuth) Authenticate(r *http.Request) (*http.Request, error) {
	if a.s.isServer() {
		return a.s.cfg.UserAuth.Authenticate(r)
	}
	addr, err := a.s.cfg.Peers.ServerAddr()
	switch {
	case err != nil && a.strict:
		return nil, errNoServerToAsk
	case err != nil:
		return a.s.cfg.UserAuth.Authenticate(r)
	}
	who, err := a.ask(r, addr)
	if err != nil {
		var apiErr *api.Error
		if errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnauthorized {
			return nil, apiErr
		}
		// The caller is not told where the server is.
		a.s.log.Debug("check a caller's credentials with a server", "server", addr, "error", err)
		return nil, errNoServerToAsk
	}
	return withIdentity(r, Identity{ACL: who.ACL, User: who.User, Role: who.Role, TokenID: who.TokenID}), nil
}

// ask asks the server at addr who the caller of r is, with its token.
func (a workerAuth) ask(r *http.Request, addr string) (*api.WhoAmI, error) {
	c, err := api.NewClient(addr, requestToken(r))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), askTimeout)
	defer cancel()
	return c.WithHTTPClient(a.s.cfg.Peers.Streams()).WhoAmI(ctx)
}
