package ingress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
)

// What one connection may hold the ingress to. A request's body must come
// at a pace (an upload as slow as a phone's still does), and its answer
// has no bound: streamed answers (tokens of a completion) last as long as
// they last.
const (
	// readHeaderTimeout bounds the wait for a request's headers, and
	// for a TLS handshake: a client that sends nothing is cut off.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout closes a keep-alive connection that carries no request
	// for that long.
	idleTimeout = 2 * time.Minute
	// bodyGrace and bodyRate bound reading a request's body: by bodyGrace
	// after its headers, and then every byte by bodyRate more: a body
	// that comes slower is cut off (a byte a second: after about
	// bodyGrace).
	bodyGrace = 10 * time.Second
	bodyRate  = 1 << 10 // bytes a second
	// maxHeaderBytes bounds a request's headers.
	maxHeaderBytes = 64 << 10
)

// Timeouts are the bounds above; a zero field takes its default. Tests
// change them.
type Timeouts struct {
	ReadHeader, Idle, BodyGrace time.Duration
	// BodyRate is the least pace of a body, in bytes a second.
	BodyRate int64
}

func (t Timeouts) withDefaults() Timeouts {
	return Timeouts{
		ReadHeader: cmp.Or(t.ReadHeader, readHeaderTimeout),
		Idle:       cmp.Or(t.Idle, idleTimeout),
		BodyGrace:  cmp.Or(t.BodyGrace, bodyGrace),
		BodyRate:   cmp.Or(t.BodyRate, bodyRate),
	}
}

// ServerConfig configures a Server.
type ServerConfig struct {
	// Listener is what the server serves on; the caller makes it (TLS,
	// when the cluster has it, is the listener's).
	Listener net.Listener
	// Handler is the Proxy.
	Handler  http.Handler
	Timeouts Timeouts
	// ConnContext and Serving tell the listener which connections serve
	// a request (agent/server's ConnContext and Serving, for its
	// ConnLimiter); nil: none is told.
	ConnContext func(context.Context, net.Conn) context.Context
	Serving     func(http.Handler) http.Handler
	Logger      hclog.Logger
}

// Server serves a handler (a Proxy) on a listener.
type Server struct {
	l    net.Listener
	http *http.Server
	log  hclog.Logger
}

// NewServer returns a Server of cfg; Serve serves it.
func NewServer(cfg ServerConfig) *Server {
	t := cfg.Timeouts.withDefaults()
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	h := paced(cfg.Handler, t.BodyGrace, t.BodyRate)
	if cfg.Serving != nil {
		h = cfg.Serving(h)
	}
	return &Server{l: cfg.Listener, log: cfg.Logger, http: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnContext:       cfg.ConnContext,
		ErrorLog:          cfg.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
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

// paced serves next with the request's body read at a pace: from the
// first read (a request held for a replica of a service scaled to zero is
// read once one is there), the body must come within grace and then a
// byte per 1/rate s, or the connection's read deadline ends the body (and
// the connection). Once the body is read the deadline is lifted, so a
// streamed answer is not cut off.
func paced(next http.Handler, grace time.Duration, rate int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &pacedBody{rc: r.Body, ctl: http.NewResponseController(w), grace: grace, rate: rate}
		}
		next.ServeHTTP(w, r)
	})
}

// pacedBody is a request's body read within a deadline that moves on with
// each byte that comes.
type pacedBody struct {
	rc  io.ReadCloser
	ctl *http.ResponseController
	// start is the first read.
	start time.Time
	grace time.Duration
	rate  int64
	n     int64
	done  bool
}

func (b *pacedBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.start.IsZero() {
		b.start = time.Now()
	}
	deadline := b.start.Add(b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second)))
	_ = b.ctl.SetReadDeadline(deadline)
	n, err := b.rc.Read(p)
	b.n += int64(n)
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF):
		b.done = true
		_ = b.ctl.SetReadDeadline(time.Time{})
	case errors.As(err, &ne) && ne.Timeout():
		err = fmt.Errorf("the request's body came slower than %d bytes a second (%d bytes in %s): %w",
			b.rate, b.n, time.Since(b.start).Round(time.Second), err)
	}
	return n, err
}

func (b *pacedBody) Close() error { return b.rc.Close() }
