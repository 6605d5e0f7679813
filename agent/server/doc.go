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
package server
