package server

import (
	"context"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/leader"
	"github.com/skein-dev/skein/agent/server/endpoint"
	"github.com/skein-dev/skein/fsm"
)

// The server's parts. Each serves the routes of one resource: it decodes
// a request, calls its endpoint (agent/server/endpoint) or answers from
// the state, and maps the answer to HTTP. They share one *shared, which
// holds what every handler uses: the configuration, the state, the
// bounds and the transport helpers (forward.go, write.go).

// shared is what the server and all its parts share.
type shared struct {
	cfg Config
	log hclog.Logger
	fsm *fsm.FSM
	// timeouts are cfg.Timeouts with their defaults.
	timeouts Timeouts
	// authFails limits failed authentications per token and per client
	// address.
	authFails *failLimiter
	// role is the last answer to whether this node is a server
	// (toserver.go).
	role atomic.Pointer[roleCheck]
	// ctx ends with Shutdown; followed log streams stop with it.
	ctx context.Context
}

// jobRoutes serves jobs: submit, list, detail, cancel, update, requeue,
// and fair share's view of the queue (jobs.go, requeue.go, fairshare.go;
// endpoint.Jobs and endpoint.Queue).
type jobRoutes struct {
	*shared
	jobs  endpoint.Jobs
	queue endpoint.Queue
}

// serviceRoutes serves services, and the leader's observations of the
// autoscaled ones (services.go, autoscale.go).
type serviceRoutes struct {
	*shared
	services endpoint.Services
}

// clusterRoutes serves the cluster and its nodes: status, members, Raft
// peers, join and leave, nodes and their drains, GPUs, events
// (cluster.go, drain.go, gpus.go, events.go).
type clusterRoutes struct {
	*shared
	nodes endpoint.Nodes
	// clusterView answers the reads.
	clusterView endpoint.Cluster
}

// adminRoutes serves what administrators set: ACLs, limits, fair share's
// accounts and QoS, partitions, snapshots (acl_routes.go, limits.go,
// accounts.go, partitions.go, snapshot.go).
type adminRoutes struct {
	*shared
	policy endpoint.Policy
	acl    endpoint.ACL
}

// allocRoutes serves what lives with an allocation on the node that runs
// it: logs, exec, terminals and signals, proxied there from any node
// (logs.go, exec.go, pty.go, signal.go; endpoint.Allocs decides which
// allocation, whether the caller may, and where the request goes).
type allocRoutes struct {
	*shared
	allocs endpoint.Allocs
}

// trustRoutes serves the trust API of a secure cluster: admission, join
// tokens, the CA, the keyring, revocation, renewal and the CA key's
// hand-over (trust.go; endpoint.Trust).
type trustRoutes struct {
	*shared
	trust endpoint.Trust
}

// nodeRoutes serves the rest of the node-to-node API, which only the
// leader serves, but for the lease renewals a server passes on:
// registration, reports, heartbeats, a node's view and telemetry
// (internal.go, lease.go, view.go, telemetry.go).
type nodeRoutes struct {
	*shared
	// leases passes the lease renewals that reach this server to the
	// leader while it does not lead (agent/leader/relay.go; the
	// handlers in lease.go).
	leases *leader.LeaseRelay
}
