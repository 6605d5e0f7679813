// Package leader holds what a node does while it leads the cluster: the
// scheduling loop (one sched pass per state change, its plan verified and
// committed in bounded entries), the node monitor (nodes that stop
// heartbeating are marked down, and their allocations declared lost once
// they have certainly stopped them), the record of graceful leaves, the
// autoscaler (autoscale.go: the nodes' load reports, a sched decision per
// autoscaled service, a scale entry with its reason) and the rollout loop
// (rollout.go: each step of a service's rolling update, decided by
// sched.NextRolloutStep and re-checked by the state), and the usage
// charges of fair share (usage.go: a UsageCharge entry stamped with its
// time and half-life, every 30 s once the cluster has accounts). Everything it
// decides is a Raft entry; it keeps no state a new leader would need,
// only the heartbeats and load reports it has heard since it began to
// lead.
//
// One part runs on the servers that do not lead, as the leader's other
// end: the lease relay (relay.go), which gathers the workers' renewals
// reaching a server into rounds passed to the leader, and answers each
// only once the leader recorded it. It lives beside the node monitor
// because fencing rests on both: the monitor must never hear of a
// renewal before the worker sent it.
package leader
