// Package leader holds what a node does while it leads the cluster: the
// scheduling loop (one sched pass per state change, its plan verified and
// committed in bounded entries), the node monitor (nodes that stop
// heartbeating are marked down, and their allocations declared lost once
// they have certainly stopped them), the rollout loop (each step of a
// service's rolling update, decided by sched.NextRolloutStep and
// re-checked by the state), and the record of graceful leaves.
// Everything it decides is a Raft entry; it keeps no state a new leader
// would need, only the heartbeats it has heard since it began to lead.
package leader
