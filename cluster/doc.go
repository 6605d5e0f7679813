// Package cluster is skein's consensus plumbing: it runs a hashicorp/raft
// node over a TCP transport with bbolt-backed log and stable stores, and
// exposes the few operations the agent needs (apply, leadership events,
// membership changes, shutdown).
//
// The package imports nothing else from skein. It is handed a raft.FSM and
// treats commands as opaque bytes, so the state model can change without
// touching it. See DESIGN.md for why the timings, stores and bootstrap
// rules are what they are.
//
// Files: config.go holds Config and the defaults, errors.go the sentinel
// errors, cluster.go the Cluster type and its lifecycle, raft.go everything
// that talks to raft. Gossip (memberlist) will live in gossip.go.
package cluster
