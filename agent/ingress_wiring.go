package agent

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/skein-dev/skein/agent/ingress"
	"github.com/skein-dev/skein/agent/server"
	"github.com/skein-dev/skein/trust"
)

// listenIngress binds the ingress's port on the bind address, when the
// agent runs one (Config.IngressPort).
func (a *Agent) listenIngress() error {
	if a.cfg.IngressPort == 0 {
		return nil
	}
	addr := net.JoinHostPort(a.cfg.BindAddr, portString(a.cfg.IngressPort))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for the ingress on %s (--ingress-port; none runs no ingress): %w", addr, err)
	}
	a.ingressListener = l
	return nil
}

// ingressPort is the port the ingress is bound to, 0 without one: every
// node's ingress serves on the port its agent was given, so the API names
// this one in services' URLs.
func (a *Agent) ingressPort() int {
	if a.ingressListener == nil {
		return 0
	}
	return a.ingressListener.Addr().(*net.TCPAddr).Port
}

// newIngress makes the ingress's server on its listener, secure as the
// API is (agent/ingress/DESIGN.md): HTTPS with the node's certificate in
// a cluster with TLS, and services that are not public served only to
// callers the user API admits (a worker asks a server). It routes by the
// node's view (agent/node), which holds the services' live replicas on
// a server and a worker alike.
func (a *Agent) newIngress() *ingress.Server {
	// Its connections have a budget of their own, beside the API's,
	// within the limits sized from the agent's descriptors.
	a.ingressConns = server.LimitConns(a.ingressListener, server.ListenerConfig{
		Limits:      a.cfg.conns.Ingress,
		IsNode:      a.nodes.has,
		HTTPRefusal: a.secure == nil,
		Logger:      a.logger.Named("ingress"),
	})
	l := net.Listener(a.ingressConns)
	if a.secure != nil {
		l = tls.NewListener(l, a.secure.ServerTLS(tls.NoClientCert))
	}
	a.proxy = ingress.New(ingress.Config{State: a.node.View(), Auth: a.server.UserAuth(), Credential: a.isCredential,
		Logger: a.logger.Named("ingress")})
	return ingress.NewServer(ingress.ServerConfig{
		Listener:    l,
		Handler:     a.proxy,
		Timeouts:    a.cfg.IngressTimeouts,
		ConnContext: server.ConnContext,
		Serving:     server.Serving,
		Logger:      a.logger.Named("ingress"),
	})
}

// IngressConnStats returns the counts of the ingress's connections; zero
// without an ingress.
func (a *Agent) IngressConnStats() server.ConnStats {
	if a.ingressConns == nil {
		return server.ConnStats{}
	}
	return a.ingressConns.Stats()
}

// stopIngress stops the ingress, giving requests in flight the API's
// drain, then cutting off the streams still open.
func (a *Agent) stopIngress() {
	switch {
	case a.ingress != nil:
		ctx, cancel := context.WithTimeout(context.Background(), serverDrain)
		a.ingress.Shutdown(ctx)
		cancel()
	case a.ingressListener != nil:
		_ = a.ingressListener.Close()
	}
}

// IngressAddr is the base URL of this agent's ingress; "" when it runs
// none.
func (a *Agent) IngressAddr() string {
	if a.ingressListener == nil {
		return ""
	}
	port := a.ingressListener.Addr().(*net.TCPAddr).Port
	scheme := "http://"
	if a.cfg.secure() {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(a.cfg.AdvertiseAddr, fmt.Sprint(port))
}

// ingressInFlight is what the ingress has in flight to a service's
// replicas, by allocation (nil without an ingress): the node reports it
// for autoscaling.
func (a *Agent) ingressInFlight(service string) map[string]int64 {
	if a.proxy == nil {
		return nil
	}
	return a.proxy.InFlight(service)
}

// isCredential reports whether a token is one of the cluster's user
// credentials, which the ingress never passes to a replica: one of an ACL
// token's shape (known here or not), or the cluster's API token where this
// node knows it (its --token, or the hash a secure cluster's state holds).
func (a *Agent) isCredential(token string) bool {
	if trust.LooksLikeACLToken(token) {
		return true
	}
	if a.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(a.cfg.Token)) == 1 {
		return true
	}
	if a.secure != nil {
		if t, ok := a.fsm.Trust(); ok && t.UserTokenHash != "" {
			return trust.EqualHash(trust.HashSecret(token), t.UserTokenHash)
		}
	}
	return false
}
