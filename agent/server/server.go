package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/agent/peer"
	"github.com/skein-dev/skein/agent/secure"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/agent/ui"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/cluster"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/structs"
)

// What one connection may hold the server to (agent/DESIGN.md, "Bounded
// API"): a client that sends nothing, sends slowly or stops reading gives
// its connection back within these (the defaults of Timeouts). Answers
// that stream or wait longer renew the write bound before each write
// (holdWrite).
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

// Timeouts are the bounds above; a zero field takes its default. Tests
// shorten them, to see a connection cut off in seconds.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// withDefaults fills the zero fields.
func (t Timeouts) withDefaults() Timeouts {
	return Timeouts{
		ReadHeader: cmp.Or(t.ReadHeader, readHeaderTimeout),
		Read:       cmp.Or(t.Read, readTimeout),
		Write:      cmp.Or(t.Write, writeTimeout),
		Idle:       cmp.Or(t.Idle, idleTimeout),
	}
}

// internalPrefix is where the node-to-node API lives.
const internalPrefix = "/v1/internal/"

// Raft is what the server needs of Raft and gossip.
type Raft interface {
	IsLeader() bool
	Leader() (addr, id string)
	Servers() ([]cluster.RaftServer, error)
	Join(addrs []string) (int, error)
}

// Config configures a Server.
type Config struct {
	Listener net.Listener
	NodeID   string
	NodeName string
	FSM      *fsm.FSM
	// View is this node's view of the state (agent/node): what it ran,
	// which a worker's FSM does not hold. nil: FSM.
	View *fsm.FSM
	Raft Raft
	// Apply writes one entry through Raft (this node must lead) and
	// returns what the FSM returned.
	Apply func(structs.MessageType, any) (any, error)
	// Restore replaces the cluster's state with a backup (this node
	// must lead): reindex gives the backup's bytes at the index Raft
	// will install it at (cluster.Cluster.Restore). nil: never.
	Restore func(reindex func(index uint64) ([]byte, error), timeout time.Duration) (uint64, error)
	// Forget removes a node down or left from the state, and from Raft
	// where it is a server (this node must lead). nil: never.
	Forget func(nodeID, reason string) error
	// Depart takes a leaving node out of Raft, where it is a server, and
	// marks it left (this node must lead). nil: never.
	Depart func(nodeID string) error
	Peers  *peer.Peers
	// Heartbeats records the heartbeats that reach this node; only the
	// leader's record counts (agent/leader).
	Heartbeats interface {
		HeardFrom(nodeID string, at time.Time)
	}
	// Autoscaler takes the nodes' reports of the autoscaled services'
	// load and tells what it last observed of a service; only the
	// leader's counts (agent/leader).
	Autoscaler interface {
		ReportLoads(nodeID string, loads []structs.ServiceLoad, at time.Time)
		Observed(service string) (structs.AutoscaleObservation, bool)
	}
	// Logs reads the output of this node's allocations: OpenLog what is
	// kept of a stream (reading at its end returns io.EOF; with follow,
	// reading again returns what was written since), OpenLogTail its last
	// maxBytes, or last lines (lines >= 0) within those, read back from
	// its end, LogDropped how many bytes the log cap dropped, and that cap.
	Logs interface {
		OpenLog(allocID, stream string, follow bool) (io.ReadCloser, error)
		OpenLogTail(allocID, stream string, follow bool, maxBytes int64, lines int) (io.ReadCloser, error)
		LogDropped(allocID, stream string) (dropped, logMax int64, err error)
	}
	// Exec runs a command beside one of this node's running allocations,
	// as its job would (agent/runner's Exec): its exit code and the end
	// of its output. Nil: this node runs none.
	Exec func(ctx context.Context, allocID string, argv []string) (api.ExecResult, error)
	// ExecPTY runs a command under a terminal of rows by cols (TERM term)
	// beside one of this node's running allocations, as Exec does, until
	// it ends or ctx does (agent/runner's ExecPTY). Nil: this node runs
	// none.
	ExecPTY func(ctx context.Context, allocID string, argv []string, term string, rows, cols uint16) (PTYProcess, error)
	// Signal sends a signal (a name of structs.JobSignals) to what one of
	// this node's running allocations runs (agent/runner's Signal). Nil:
	// this node runs none.
	Signal func(allocID, signal string) error
	// Faults injects health events into this node's simulated GPUs.
	Faults interface {
		InjectFault(gpu.Event) error
	}
	// Telemetry reads this node's GPUs, for the other nodes' web UIs
	// (telemetry.go); nil: none.
	Telemetry gpu.Telemetry
	// Leave makes this node leave the cluster, in the background.
	Leave func()
	// JobRetention is how long a finished job stays (reported by status).
	JobRetention time.Duration
	// Mail says whether the node has a mail program for jobs' mail
	// (--mail-prog; reported by status).
	Mail bool
	// IngressPort is the port the nodes' ingress serves services on, in
	// the endpoints a service's detail lists (0: no ingress, none).
	IngressPort int
	// Trust serves admission, join tokens, the CA and the keyring of a
	// secure cluster; nil in a plaintext one.
	Trust *secure.Secure
	// Audit records users' writes; nil records nothing.
	Audit *AuditLog
	// UI is the web UI's configuration; nil serves none.
	UI *ui.Config
	// Timeouts bound what one connection may hold the server to.
	Timeouts Timeouts
	// MaxWrites bounds the submitters' writes (jobs and services) this
	// node carries out at once while it leads; over it they are answered
	// 429 with Retry-After (busy.go). 0 is DefaultMaxWrites.
	MaxWrites int
	// UserAuth guards the user API, NodeAuth the node-to-node API.
	UserAuth Authenticator
	NodeAuth Authenticator
	// IsNode reports whether an address is one of the cluster's nodes:
	// in a plaintext cluster, requests from those are never limited for
	// failed authentications (in a secure one a node certificate says so).
	IsNode func(netip.Addr) bool
	// Starved reports whether this node's process is short of CPU
	// (agent/overload; nil: never): while it leads, it then sheds users'
	// reads and answers scrapes from the last one (shed.go).
	Starved func() bool
	// Metrics serves GET /metrics (agent/metrics) and times every
	// request of both APIs; nil serves no metrics and times nothing.
	Metrics Metrics
	Logger  hclog.Logger
}

// Metrics is what the server needs of the node's metrics.
type Metrics interface {
	// ServeHTTP answers a scrape.
	http.Handler
	// ObserveRequest records one request of an API ("user" or
	// "internal") by the pattern of the route it matched.
	ObserveRequest(api, route string, code int, took time.Duration)
}

// Server serves a node's two APIs. It holds the listener, the routes
// and what every request passes through (authentication, limits, audit,
// timing, shedding); the handlers are its parts', one per resource
// (routes.go), each over the endpoints it calls (agent/server/endpoint)
// and what they all share.
type Server struct {
	*shared
	http *http.Server
	// writes bounds the submitters' writes in flight while this node
	// leads.
	writes *writeGate
	// scrapes is the leader's last answer to a scrape (shed.go).
	scrapes scrapeCache
	// The API's parts, whose handlers the route tables name.
	jobs     *jobRoutes
	services *serviceRoutes
	cluster  *clusterRoutes
	admin    *adminRoutes
	allocs   *allocRoutes
	trustAPI *trustRoutes
	internal *nodeRoutes
	// cancel ends ctx, with Shutdown.
	cancel context.CancelFunc
}

// New returns a Server for cfg.Listener; Serve serves it.
func New(cfg Config) *Server {
	sh := &shared{cfg: cfg, log: cfg.Logger, fsm: cfg.FSM, timeouts: cfg.Timeouts.withDefaults()}
	s := &Server{shared: sh}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.authFails = newFailLimiter(s.sentByNode, cfg.Logger)
	s.writes = newWriteGate(cfg.MaxWrites, cfg.Logger)
	queue := endpoint.Queue{State: cfg.FSM}
	s.jobs = &jobRoutes{shared: sh, queue: queue, jobs: endpoint.Jobs{State: cfg.FSM,
		QueuePlace: func(jobID string) *api.QueuePlace { return queue.Place(jobID, now()) }}}
	s.services = &serviceRoutes{shared: sh, services: endpoint.Services{State: cfg.FSM, IngressPort: cfg.IngressPort}}
	s.cluster = &clusterRoutes{shared: sh, nodes: endpoint.Nodes{State: cfg.FSM, Forget: cfg.Forget}, clusterView: clusterEndpoint(cfg)}
	s.admin = &adminRoutes{shared: sh, policy: endpoint.Policy{State: cfg.FSM}, acl: endpoint.ACL{State: cfg.FSM}}
	s.allocs = &allocRoutes{shared: sh, allocs: allocsEndpoint(cfg)}
	s.trustAPI = &trustRoutes{shared: sh, trust: trustEndpoint(cfg)}
	s.internal = &nodeRoutes{shared: sh}
	s.internal.leases = leader.NewLeaseRelay(s.internal.passRenewals)
	go s.internal.leases.Run(s.ctx)
	top := http.NewServeMux()
	top.Handle(internalPrefix, guard(cfg.NodeAuth, s.authFails, s.failedAt(viaInternal), tagCaller(s.internalRoutes())))
	// A joining node's credential is its join token, and the CA
	// certificate is public: neither needs an API token.
	top.HandleFunc("POST /v1/admit", s.trustAPI.handleAdmit)
	top.HandleFunc("GET /v1/ca", s.trustAPI.handleCA)
	user := s.userRoutes()
	top.Handle("/", s.sheddingReads(guard(workerAuth{s: s}, s.authFails, s.failedAt(viaAPI), user)))
	if cfg.UI != nil {
		s.mountUI(top, user)
	}
	s.http = &http.Server{
		Handler:           Serving(s.toServer(top)),
		ConnContext:       ConnContext,
		ReadHeaderTimeout: s.timeouts.ReadHeader,
		ReadTimeout:       s.timeouts.Read,
		WriteTimeout:      s.timeouts.Write,
		IdleTimeout:       s.timeouts.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          cfg.Logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return s
}

// sentByNode reports whether a request comes from one of the cluster's
// nodes: in a secure cluster it carries a node certificate (checked in
// the TLS handshake, no secret is compared here), in a plaintext one it
// comes from a node's address.
func (s *shared) sentByNode(r *http.Request) bool {
	if s.cfg.Trust != nil {
		_, err := s.cfg.NodeAuth.Authenticate(r)
		return err == nil
	}
	return s.cfg.IsNode != nil && s.cfg.IsNode(requestIP(r))
}

// holdWrite gives the next write of an answer the write timeout from now.
// A handler that streams, or waits longer than the write timeout before
// it answers, calls it before each write: the server's own bound runs
// from the request's arrival.
func (s *shared) holdWrite(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.timeouts.Write))
}

// userRoutes is the user API. Every route needs a permission of the
// caller's role (structs.Permission); those on one job or service also
// check who owns it, in the handler. The submitters' writes are bounded
// on the leader (bounded).
func (s *Server) userRoutes() http.Handler {
	read, submit, nodes, acl := structs.PermRead, structs.PermSubmit, structs.PermNodes, structs.PermACL
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/jobs", need(submit, "submit jobs", s.bounded(s.jobs.handleSubmit)))
	mux.HandleFunc("GET /v1/jobs", need(read, "list jobs", s.jobs.handleJobs))
	mux.HandleFunc("GET /v1/jobs/{id}", need(read, "see jobs", s.jobs.handleJob))
	mux.HandleFunc("DELETE /v1/jobs/{id}", need(submit, "cancel jobs", s.bounded(s.jobs.handleCancel)))
	mux.HandleFunc("POST /v1/jobs/{id}/update", need(submit, "hold, release or change jobs", s.bounded(s.jobs.handleJobUpdate)))
	mux.HandleFunc("POST /v1/jobs/{id}/exec", need(submit, "run commands in jobs", s.allocs.handleExec))
	mux.HandleFunc("POST /v1/jobs/{id}/signal", need(submit, "signal jobs", s.allocs.handleSignal))
	mux.HandleFunc("POST /v1/jobs/{id}/requeue", need(submit, "requeue jobs", s.bounded(s.jobs.handleRequeue)))
	mux.HandleFunc("GET /v1/jobs/{id}/logs", need(submit, "read logs", s.allocs.handleLogs))
	mux.HandleFunc("POST /v1/services", need(submit, "create services", s.bounded(s.services.handleServiceCreate)))
	mux.HandleFunc("GET /v1/services", need(read, "list services", s.services.handleServices))
	mux.HandleFunc("GET /v1/services/{name}", need(read, "see services", s.services.handleService))
	mux.HandleFunc("POST /v1/services/{name}/scale", need(submit, "scale services", s.bounded(s.services.handleServiceScale)))
	mux.HandleFunc("POST /v1/services/{name}/autoscale", need(submit, "autoscale services", s.bounded(s.services.handleServiceAutoscale)))
	mux.HandleFunc("POST /v1/services/{name}/update", need(submit, "update services", s.bounded(s.services.handleServiceUpdate)))
	mux.HandleFunc("DELETE /v1/services/{name}", need(submit, "delete services", s.bounded(s.services.handleServiceDelete)))
	mux.HandleFunc("GET /v1/nodes", need(read, "list nodes", s.cluster.handleNodes))
	mux.HandleFunc("GET /v1/status", need(read, "see the status", s.cluster.handleStatus))
	mux.HandleFunc("GET /v1/events", need(read, "read events", s.cluster.handleEvents))
	mux.HandleFunc("GET /v1/members", need(read, "list members", s.cluster.handleMembers))
	mux.HandleFunc("GET /v1/raft/peers", need(read, "list Raft peers", s.cluster.handleRaftPeers))
	mux.HandleFunc("POST /v1/join", need(nodes, "join a cluster", s.cluster.handleJoin))
	mux.HandleFunc("POST /v1/leave", need(nodes, "make a node leave", s.cluster.handleLeave))
	mux.HandleFunc("GET /v1/gpus", need(read, "list GPUs", s.cluster.handleGPUs))
	mux.HandleFunc("GET /v1/partitions", need(read, "list partitions", s.admin.handlePartitions))
	mux.HandleFunc("POST /v1/partitions", need(nodes, "set partitions' limits", s.admin.handlePartitionSet))
	mux.HandleFunc("POST /v1/gpus/cordon", need(nodes, "cordon a GPU", s.cluster.handleGPUCordon))
	mux.HandleFunc("POST /v1/gpus/uncordon", need(nodes, "uncordon a GPU", s.cluster.handleGPUCordon))
	mux.HandleFunc("POST /v1/gpus/fault", need(nodes, "inject a GPU fault", s.cluster.handleGPUFault))
	mux.HandleFunc("POST /v1/join-tokens", need(nodes, "create join tokens", s.trustAPI.handleJoinTokenCreate))
	mux.HandleFunc("GET /v1/join-tokens", need(nodes, "list join tokens", s.trustAPI.handleJoinTokens))
	mux.HandleFunc("DELETE /v1/join-tokens/{id}", need(nodes, "revoke join tokens", s.trustAPI.handleJoinTokenRevoke))
	mux.HandleFunc("GET /v1/keyring", need(nodes, "see the keyring", s.trustAPI.handleKeyring))
	mux.HandleFunc("POST /v1/keyring/rotate", need(nodes, "rotate the keyring", s.trustAPI.handleKeyringRotate))
	mux.HandleFunc("POST /v1/nodes/{id}/revoke", need(nodes, "revoke nodes", s.trustAPI.handleNodeRevoke))
	mux.HandleFunc("POST /v1/nodes/{id}/drain", need(nodes, "drain nodes", s.cluster.handleNodeDrain))
	mux.HandleFunc("POST /v1/nodes/{id}/undrain", need(nodes, "undrain nodes", s.cluster.handleNodeDrain))
	mux.HandleFunc("POST /v1/nodes/{id}/remove", need(nodes, "remove nodes", s.cluster.handleNodeRemove))
	mux.HandleFunc("GET /v1/snapshot", need(acl, "save snapshots", s.admin.handleSnapshotSave))
	mux.HandleFunc("POST /v1/snapshot/restore", need(acl, "restore snapshots", s.admin.handleSnapshotRestore))
	mux.HandleFunc("GET /v1/limits", need(read, "see limits", s.admin.handleLimits))
	mux.HandleFunc("GET /v1/limits/{user}", need(read, "see limits", s.admin.handleUserLimits))
	mux.HandleFunc("POST /v1/limits", need(acl, "set limits", s.admin.handleLimitsSet))
	mux.HandleFunc("GET /v1/accounts", need(read, "see accounts", s.admin.handleAccounts))
	mux.HandleFunc("POST /v1/accounts", need(acl, "change accounts", s.admin.handleAccountSet))
	mux.HandleFunc("POST /v1/qos", need(acl, "change QoS", s.admin.handleQoSSet))
	mux.HandleFunc("GET /v1/share", need(read, "see fair share", s.jobs.handleShare))
	mux.HandleFunc("GET /v1/prio", need(read, "see the queue's priorities", s.jobs.handlePrio))
	mux.HandleFunc("POST /v1/acl/bootstrap", need(acl, "bootstrap ACLs", s.admin.handleACLBootstrap))
	mux.HandleFunc("GET /v1/acl/whoami", s.admin.handleWhoAmI)
	mux.HandleFunc("POST /v1/acl/tokens", need(acl, "create ACL tokens", s.admin.handleACLTokenCreate))
	mux.HandleFunc("GET /v1/acl/tokens", need(acl, "list ACL tokens", s.admin.handleACLTokens))
	mux.HandleFunc("DELETE /v1/acl/tokens/{id}", need(acl, "revoke ACL tokens", s.admin.handleACLTokenRevoke))
	mux.HandleFunc("GET /v1/acl/users", need(acl, "list ACL users", s.admin.handleACLUsers))
	mux.HandleFunc("POST /v1/acl/users", need(acl, "set what a user may", s.admin.handleACLUserSet))
	mux.HandleFunc("GET /v1/audit", need(acl, "read the audit log", s.handleAudit))
	if s.cfg.Metrics != nil {
		mux.HandleFunc("GET /metrics", need(read, "read metrics", s.serveMetrics))
	}
	mux.HandleFunc("/", notFound)
	return s.audited(s.timed("user", mux))
}

// internalRoutes is the node-to-node API.
func (s *Server) internalRoutes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+internalPrefix+"heartbeat", s.internal.handleHeartbeat)
	mux.HandleFunc("POST "+internalPrefix+"heartbeats", s.internal.handleRelayedHeartbeats)
	mux.HandleFunc("POST "+internalPrefix+"register", s.internal.handleRegister)
	mux.HandleFunc("POST "+internalPrefix+"depart", s.internal.handleDepart)
	mux.HandleFunc("POST "+internalPrefix+"alloc-updates", s.internal.handleAllocUpdates)
	mux.HandleFunc("POST "+internalPrefix+"gpu-health", s.internal.handleGPUHealth)
	mux.HandleFunc("POST "+internalPrefix+"loads", s.internal.handleLoads)
	mux.HandleFunc("GET "+internalPrefix+"autoscale/{name}", s.services.handleObserved)
	mux.HandleFunc("POST "+internalPrefix+"renew", s.trustAPI.handleRenew)
	mux.HandleFunc("POST "+internalPrefix+"ca-key", s.trustAPI.handleCAKey)
	mux.HandleFunc("GET "+internalPrefix+"nodes/{id}/view", s.internal.handleNodeView)
	mux.HandleFunc("GET "+internalPrefix+"allocs/{id}/logs", s.allocs.handleAllocLogs)
	mux.HandleFunc("GET "+internalPrefix+"nodes/{id}/telemetry", s.internal.handleNodeTelemetry)
	mux.HandleFunc(internalPrefix, notFound)
	return s.timed("internal", mux)
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

// trustEndpoint is the trust API's endpoint over cfg's trust, Raft and
// gossip.
func trustEndpoint(cfg Config) endpoint.Trust {
	t := endpoint.Trust{State: cfg.FSM, Servers: func() ([]cluster.RaftServer, error) { return cfg.Raft.Servers() }}
	if cfg.Trust != nil { // a nil *secure.Secure is not a nil Authority
		t.Authority = cfg.Trust
	}
	if cfg.Peers != nil {
		t.Gossip = cfg.Peers.Members
	}
	return t
}

// clusterEndpoint is the cluster's reads over cfg's state, Raft and
// gossip.
func clusterEndpoint(cfg Config) endpoint.Cluster {
	c := endpoint.Cluster{State: cfg.FSM, Raft: cfg.Raft, NodeID: cfg.NodeID, NodeName: cfg.NodeName, JobRetention: cfg.JobRetention, Mail: cfg.Mail}
	if cfg.Peers != nil {
		c.Gossip, c.Alone = cfg.Peers.Members, cfg.Peers.Alone
	}
	return c
}

// allocsEndpoint decides, over cfg's state and a worker's view, what
// reaches a running job's processes.
func allocsEndpoint(cfg Config) endpoint.Allocs {
	a := endpoint.Allocs{State: cfg.FSM, NodeID: cfg.NodeID, NodeName: cfg.NodeName}
	if cfg.View != nil { // a nil *fsm.FSM is not a nil AllocsState
		a.View = cfg.View
	}
	return a
}
