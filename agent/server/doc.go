// Package server is a node's HTTP surface. It serves two APIs on one
// listener, each on its own router behind its own Authenticator: the user
// API (/v1/...: jobs, nodes, GPUs, cluster membership), which answers
// reads from the local FSM and passes writes to the leader, and the
// internal node-to-node API (/v1/internal/...: heartbeats, registrations,
// allocation reports, GPU health), which only the leader serves.
package server
