// Package sched decides where queued jobs run: it turns a read-only view of
// the cluster state and a list of queued jobs into a structs.Plan.
//
// Schedule is the queue: it orders the jobs by effective priority (priority
// plus one point per minute waited, no cap), first come first served among
// equals, and places them in that order. The first job that does not fit
// gets a reservation on the nodes that free up first, judged by the time
// limits of what runs there, and the jobs behind it start now only where
// they do not delay it (EASY backfill). Place is the same pipeline in the
// caller's order, greedy, without a reservation.
//
// Placement is a pure function (DESIGN.md §1.3): no clock (the leader
// passes the time in), no I/O, no goroutines and no randomness, so the same
// state, jobs and time always give the same plan. Each job goes through a
// short pipeline: cheap filters (node ready, constraints, GPU model and
// memory, free GPUs, CPUs, memory, the reservation), a scorer (binpack or
// spread), and a pick, found through an index of nodes by free GPU count;
// inside the chosen node, BestGPUs picks the best-connected free GPUs
// (NVLink, then PCIe switch, then NUMA node).
// One accounting object, the ledger, hands out GPUs and can never hand one
// out twice. Every node a filter rejects is counted under a named reason,
// which becomes the job's blocked reason.
//
// The plan is a proposal: the leader verifies it against the newest state
// and the FSM re-checks it in Apply.
package sched
