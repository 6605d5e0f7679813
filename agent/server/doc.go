// Package server is a node's HTTP surface. It serves two APIs on one
// listener, each on its own router behind its own Authenticator: the user
// API (/v1/...: jobs, services, nodes, GPUs, cluster membership), which answers
// reads from the local FSM and passes writes to the leader, and the
// internal node-to-node API (/v1/internal/...: heartbeats, registrations,
// allocation reports, GPU health), which only the leader serves. It also
// mounts the web UI (agent/ui) at /ui/, whose pages the user authenticator
// checks with the token of the UI's session cookie (ui.go). Users
// are who their ACL token says (acl.go), every user route needs a
// permission of the caller's role (the route table in server.go), and
// users' writes are audit-logged (audit.go). What a
// client can make it hold is bounded: time per connection (server.go),
// connections per client address and in total with a reserve for the
// cluster's nodes (listener.go), failed authentications per token
// and per client address (ratelimit.go).
//
// # How a request is served
//
// The package is a thin transport over the endpoints of its subpackage
// endpoint, which hold what the user API's routes decide, apart from
// HTTP. Three layers, each in its own place:
//
//   - Server (server.go) holds the listener and the route tables, and
//     what every request passes through: authentication, the route's
//     permission, rate limits, the bound on writes in flight (busy.go),
//     shedding (shed.go), timing, the audit record, a worker's hand-over
//     to a server (toserver.go).
//   - Its parts (routes.go), one per resource (jobRoutes,
//     serviceRoutes, clusterRoutes, adminRoutes, allocRoutes,
//     trustRoutes, nodeRoutes), hold the handlers: each decodes its
//     request (wire.go), calls its endpoint with the caller's Identity,
//     and maps the answer, or the error by its kind, to HTTP (statusOf).
//     They share one *shared: the configuration, the state, and the
//     transport helpers.
//   - The endpoints take plain Go values and a Writer, and read the
//     state through the narrow interface each declares; their tests use
//     fakes of both.
//
// # Where a route's logic lives
//
// Each part's handlers call these endpoints (agent/server/endpoint):
//
//   - jobRoutes (jobs.go, requeue.go, fairshare.go): endpoint.Jobs for
//     jobs, endpoint.Queue for fair share's views (GET /v1/share,
//     /v1/prio, and a queued job's place in its detail).
//   - serviceRoutes (services.go, autoscale.go): endpoint.Services.
//   - clusterRoutes (cluster.go, drain.go, gpus.go, events.go):
//     endpoint.Cluster for the reads (status, nodes, members, Raft
//     peers, GPUs, the events' query and pages) and whether this node
//     may leave; endpoint.Nodes for drains, removals, GPU cordons and
//     the target of an injected GPU fault.
//   - adminRoutes (acl_routes.go, limits.go, accounts.go,
//     partitions.go, snapshot.go): endpoint.Policy (limits, accounts,
//     QoS, partitions) and endpoint.ACL.
//   - allocRoutes (logs.go, exec.go, pty.go, signal.go):
//     endpoint.Allocs decides which job, whether the caller may, and
//     where the request goes: the allocation whose output a log read
//     streams (LogsOf, LogAlloc), the rank a command or terminal runs
//     beside (PlanExec), the ranks here and the nodes to relay a signal
//     to (PlanSignal). The transport carries the plan out: streams,
//     proxies, upgrades to a terminal (pty.go), relays.
//   - trustRoutes (trust.go): endpoint.Trust, over the narrow
//     endpoint.Authority that agent/secure satisfies: admission, join
//     tokens, the CA, the keyring, revocation (and how far cutting the
//     node off has come, CutOff), renewal, the CA key's hand-over.
//
// What stays in the transport, because it is HTTP or this node's own
// machinery rather than a decision over the state: following a stream
// (logs, events: waiting on the state's changes, keep-alives), relaying
// to another node, terminals' frames, snapshots (a stream of the state,
// and Raft's restore), joining a cluster (Raft's join of the addresses
// given), the audit log (this node's file), metrics, and the
// node-to-node API (internal.go, lease.go, view.go, telemetry.go),
// whose writes are the leader's own, not a user's.
//
// Every user write takes one path (write.go): the request's Writer
// applies the endpoint's entry through Raft (Config.Apply) on the
// leader, and on any other node passes the request on to the leader
// (forward.go) and relays its answer. An endpoint checks first what any
// node can, so a bad request is refused where it arrives; a job this
// node does not know yet is the leader's to answer, for a write and for
// a job's detail (the leader may have committed it and this node not
// applied it: a client that submits through a follower and asks at
// once). The
// node-to-node API's writes are the leader's alone: a node that does not
// lead refuses them (leaderRequest) and the sender asks the leader.
package server
