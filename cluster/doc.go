// Package cluster is skein's membership and consensus plumbing: it runs a
// hashicorp/raft node over TCP with bbolt-backed stores and, optionally,
// a memberlist gossip member that finds peers, spreads small metadata,
// detects failures and drives raft membership from the leader.
//
// The package imports nothing else from skein. It is handed a raft.FSM and
// treats commands and gossip metadata as opaque bytes, so the state model
// can change without touching it. See DESIGN.md for why the timings,
// stores, bootstrap and voter rules are what they are.
//
// Files: config.go holds Config and the defaults, errors.go the sentinel
// errors, cluster.go the Cluster type and its lifecycle, raft.go everything
// that talks to raft, gossip.go memberlist (members, events, join, keys,
// metadata, memberlist's health score), membership.go the leader's
// membership work (autopilot, voter planning, bootstrap-expect, Leave,
// what it last heard of the followers) and partition.go the transports and
// the Partitioner tests use to cut nodes off.
package cluster
