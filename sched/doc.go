// Package sched decides where queued jobs run: it turns a read-only view of
// the cluster state and a list of queued jobs into a structs.Plan.
//
// Placement is a pure function (DESIGN.md §1.3): no clock, no I/O, no
// goroutines and no randomness, so the same state and jobs always give the
// same plan. Each job goes through a short pipeline: cheap filters (node
// ready, constraints, GPU model and memory, free GPUs, CPUs, memory), a
// scorer (binpack), and a pick; inside the chosen node, BestGPUs picks the
// best-connected free GPUs (NVLink, then PCIe switch, then NUMA node). One accounting object, the ledger, hands out
// GPUs and can never hand one out twice. Every node a filter rejects is
// counted under a named reason, which becomes the job's blocked reason.
//
// The plan is a proposal: the leader verifies it against the newest state
// and the FSM re-checks it in Apply.
package sched
