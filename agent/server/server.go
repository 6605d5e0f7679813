package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// What one connection may hold the server to (agent/DESIGN.md, "Bounded
// API"): a client that sends nothing, sends slowly or stops reading gives
// its connection back within these. Answers that stream or wait longer
// renew the write bound before each write (holdWrite).
const (
	// readHeaderTimeout bounds the wait for a request's headers, and for
	// a TLS handshake: a client that connects and sends nothing, or sends
	// a byte at a time (slowloris), is cut off after it. Clients and
	// nodes send their headers at once.
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds reading a whole request, body included. Bodies
	// are at most api.MaxBodyBytes (1 MiB): about 35 KB/s at least.
	readTimeout = 30 * time.Second
	// writeTimeout bounds answering, from the end of the request's
	// headers. It is longer than any handler waits by itself: a Raft
	// write (10 s), a forwarded write waiting for a leader
	// (peer.LeaderWait), a gossip join through a few addresses.
	writeTimeout = time.Minute
	// idleTimeout closes a keep-alive connection that carries no request
	// for that long; a node's heartbeats keep its connection busy.
	idleTimeout = 30 * time.Second
	// maxHeaderBytes bounds a request's headers; skein's take a few
	// hundred bytes.
	maxHeaderBytes = 64 << 10
)

// internalPrefix is where the node-to-node API lives.
const internalPrefix = "/v1/internal/"

// Raft is what the server needs of Raft and gossip.
type Raft interface {
	IsLeader() bool
	Leader() (addr, id string)
	Servers() ([]cluster.Server, error)
	Join(addrs []string) (int, error)
}

// Config configures a Server.
type Config struct {
	Listener net.Listener
	NodeID   string
	NodeName string
	FSM      *fsm.FSM
	Raft     Raft
	// Apply writes one entry through Raft (this node must lead) and
	// returns what the FSM returned.
	Apply func(structs.MessageType, any) (any, error)
	Peers *peer.Peers
	// Heartbeats records the heartbeats that reach this node; only the
	// leader's record counts (agent/leader).
	Heartbeats interface {
		HeardFrom(nodeID string, at time.Time)
	}
	// Logs finds the output files of this node's allocations.
	Logs interface {
		LogPath(allocID, stream string) (string, error)
	}
	// Faults injects health events into this node's simulated GPUs.
	Faults interface {
		InjectFault(gpu.Event) error
	}
	// Leave makes this node leave the cluster, in the background.
	Leave func()
	// JobRetention is how long a finished job stays (reported by status).
	JobRetention time.Duration
	// Trust serves admission, join tokens, the CA and the keyring of a
	// secure cluster; nil in a plaintext one.
	Trust *secure.Secure
	// UserAuth guards the user API, NodeAuth the node-to-node API.
	UserAuth Authenticator
	NodeAuth Authenticator
	// IsNode reports whether an address is one of the cluster's nodes:
	// in a plaintext cluster, requests from those are never limited for
	// failed authentications (in a secure one a node certificate says so).
	IsNode func(netip.Addr) bool
	Logger hclog.Logger
}

// Server serves a node's two APIs.
type Server struct {
	cfg  Config
	log  hclog.Logger
	fsm  *fsm.FSM
	http *http.Server
	// authFails limits failed authentications per client address.
	authFails *failLimiter
	// ctx ends with Shutdown; followed log streams stop with it.
	ctx    context.Context
	cancel context.CancelFunc
}

// New returns a Server for cfg.Listener; Serve serves it.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, fsm: cfg.FSM}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.authFails = newFailLimiter(s.fromNode, cfg.Logger)
	top := http.NewServeMux()
	top.Handle(internalPrefix, guard(cfg.NodeAuth, s.authFails, s.internalRoutes()))
	// A joining node's credential is its join token, and the CA
	// certificate is public: neither needs an API token.
	top.HandleFunc("POST /v1/admit", s.handleAdmit)
	top.HandleFunc("GET /v1/ca", s.handleCA)
	top.Handle("/", guard(cfg.UserAuth, s.authFails, s.userRoutes()))
	s.http = &http.Server{
		Handler:           top,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          cfg.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return s
}

// fromNode reports whether a request comes from one of the cluster's
// nodes: in a secure cluster it carries a node certificate (checked in
// the TLS handshake, no secret is compared here), in a plaintext one it
// comes from a node's address.
func (s *Server) fromNode(r *http.Request) bool {
	if s.cfg.Trust != nil {
		_, err := s.cfg.NodeAuth.Authenticate(r)
		return err == nil
	}
	return s.cfg.IsNode != nil && s.cfg.IsNode(requestIP(r))
}

// holdWrite gives the next write of an answer writeTimeout from now. A
// handler that streams, or waits longer than writeTimeout before it
// answers, calls it before each write: the server's own bound runs from
// the request's arrival.
func holdWrite(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
}

// userRoutes is the user API.
func (s *Server) userRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", s.handleSubmit)
	mux.HandleFunc("GET /v1/jobs", s.handleJobs)
	mux.HandleFunc("GET /v1/jobs/{id}", s.handleJob)
	mux.HandleFunc("DELETE /v1/jobs/{id}", s.handleCancel)
	mux.HandleFunc("GET /v1/jobs/{id}/logs", s.handleLogs)
	mux.HandleFunc("GET /v1/nodes", s.handleNodes)
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("GET /v1/members", s.handleMembers)
	mux.HandleFunc("GET /v1/raft/peers", s.handleRaftPeers)
	mux.HandleFunc("POST /v1/join", s.handleJoin)
	mux.HandleFunc("POST /v1/leave", s.handleLeave)
	mux.HandleFunc("GET /v1/gpus", s.handleGPUs)
	mux.HandleFunc("POST /v1/gpus/cordon", s.handleGPUCordon)
	mux.HandleFunc("POST /v1/gpus/uncordon", s.handleGPUCordon)
	mux.HandleFunc("POST /v1/gpus/fault", s.handleGPUFault)
	mux.HandleFunc("POST /v1/join-tokens", s.handleJoinTokenCreate)
	mux.HandleFunc("GET /v1/join-tokens", s.handleJoinTokens)
	mux.HandleFunc("DELETE /v1/join-tokens/{id}", s.handleJoinTokenRevoke)
	mux.HandleFunc("GET /v1/keyring", s.handleKeyring)
	mux.HandleFunc("POST /v1/keyring/rotate", s.handleKeyringRotate)
	mux.HandleFunc("POST /v1/nodes/{id}/revoke", s.handleNodeRevoke)
	mux.HandleFunc("GET /v1/limits", s.handleLimits)
	mux.HandleFunc("GET /v1/limits/{user}", s.handleUserLimits)
	mux.HandleFunc("POST /v1/limits", s.handleLimitsSet)
	mux.HandleFunc("/", notFound)
	return mux
}

// internalRoutes is the node-to-node API.
func (s *Server) internalRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+internalPrefix+"heartbeat", s.handleHeartbeat)
	mux.HandleFunc("POST "+internalPrefix+"register", s.handleRegister)
	mux.HandleFunc("POST "+internalPrefix+"alloc-updates", s.handleAllocUpdates)
	mux.HandleFunc("POST "+internalPrefix+"gpu-health", s.handleGPUHealth)
	mux.HandleFunc("POST "+internalPrefix+"renew", s.handleRenew)
	mux.HandleFunc("POST "+internalPrefix+"ca-key", s.handleCAKey)
	mux.HandleFunc(internalPrefix, notFound)
	return mux
}

func notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, fmt.Errorf("no such endpoint: %s %s", r.Method, r.URL.Path))
}

// Serve serves until Shutdown.
func (s *Server) Serve() {
	if err := s.http.Serve(s.cfg.Listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("api server stopped", "error", err)
	}
}

// Shutdown stops accepting requests, ends followed log streams and waits
// (up to ctx) for requests in flight.
func (s *Server) Shutdown(ctx context.Context) {
	s.cancel()
	_ = s.http.Shutdown(ctx)
}

func now() time.Time { return time.Now().UTC() }
