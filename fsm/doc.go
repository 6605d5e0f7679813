// Package fsm is skein's replicated state machine: it implements raft.FSM,
// applies committed log entries to the in-memory state (nodes, jobs,
// allocations, services and, in a secure cluster, the trust state: CA
// certificates, join tokens, admissions, gossip keyring; the users'
// limits; fair share's accounts, QoS and weights, and the usage charged
// to accounts and users, decayed), enforces GPU exclusivity, idempotent
// submission, the queued-jobs limits and a job's account membership there, makes, restarts and stops the replica jobs of
// services, removes finished jobs once their retention has passed, keeps
// the newest events those changes made (the event log), and answers read
// queries with deep copies of that state.
//
// See DESIGN.md in this folder for why it is built this way.
package fsm
