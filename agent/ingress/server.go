package ingress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// What one connection may hold the ingress to. There is no bound on
// reading a request or writing its answer: uploads and streamed answers
// (tokens of a completion) last as long as they last.
const (
	// readHeaderTimeout bounds the wait for a request's headers, and
	// for a TLS handshake: a client that sends nothing is cut off.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes a keep-alive connection that carries no
	// request for that long.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
)

// Server serves a handler (a Proxy) on a listener, which the caller
// makes: TLS, when the cluster has it, is the listener's.
type Server struct {
	l    net.Listener
	http *http.Server
	log  hclog.Logger
}

// NewServer returns a Server of h on l; Serve serves it.
func NewServer(l net.Listener, h http.Handler, logger hclog.Logger) *Server {
	return &Server{l: l, log: logger, http: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}}
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.l.Addr() }

// Serve serves until Shutdown.
func (s *Server) Serve() {
	if err := s.http.Serve(s.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("ingress stopped", "error", err)
	}
}

// Shutdown stops accepting requests and waits (up to ctx) for those in
// flight, then closes what is left: a streamed answer does not hold a
// node's shutdown up.
func (s *Server) Shutdown(ctx context.Context) {
	if err := s.http.Shutdown(ctx); err != nil {
		_ = s.http.Close()
	}
}
