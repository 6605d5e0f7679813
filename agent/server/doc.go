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
// endpoint, which hold what the user API's writes (and the reads they
// answer with) do, apart from HTTP. Three layers, each in its own place:
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
//   - The endpoints (endpoint.Jobs, Services, Nodes, Policy, ACL) take
//     plain Go values and a Writer, and read the state through the
//     narrow interface each declares; their tests use fakes of both.
//
// Every user write takes one path (write.go): the request's Writer
// applies the endpoint's entry through Raft (Config.Apply) on the
// leader, and on any other node passes the request on to the leader
// (forward.go) and relays its answer. An endpoint checks first what any
// node can, so a bad request is refused where it arrives. The
// node-to-node API's writes are the leader's alone: a node that does not
// lead refuses them (leaderRequest) and the sender asks the leader.
package server
