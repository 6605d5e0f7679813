// Package sched decides where queued jobs run: it turns a read-only view of
// the cluster state into the whole decision of a scheduling pass.
//
// Decide is the pass: from a View (nodes, live allocations, the queue, the
// running jobs, the states of the jobs the queue depends on) and Inputs
// (the time, the nodes the leader has not heard from lately, the GPUs
// nodes announced unhealthy by gossip) it returns a Decision: placements
// with their MASTER_PORT, the blocked jobs whose reason changed, the jobs
// to cancel because a dependency can never be met, the preemptions, and
// when the next restart backoff ends. In order it applies restart backoff,
// dependencies (--after), array caps, the leader's overlays (on copies of
// the nodes, never the view), Schedule within each owner's GPU limit,
// preemptions, the port choice, and last drops the reasons that did not
// change. The leader stamps IDs and
// times into the plan and commits it.
//
// Schedule is the queue: it orders the jobs by effective priority (priority
// plus one point per minute waited, no cap), first come first served among
// equals, and places them in that order. The first job that does not fit
// gets a reservation on the nodes that free up first, judged by the time
// limits of what runs there, and the jobs behind it start now only where
// they do not delay it (EASY backfill). Place is the same pipeline in the
// caller's order, greedy, without a reservation.
//
// With fair share (the cluster has accounts), the queue's order is the
// multifactor priority instead (priority.go): weighted age, fair-share,
// job-size and QoS factors, the fair-share factor from the account tree
// by Slurm's fair-tree ranking (FairTree), and a user's --priority
// ordering only its own jobs among the places they earned.
//
// Placement is a pure function (docs/architecture.md, "The scheduler is
// pure"): no clock (the leader
// passes the time in), no I/O, no goroutines and no randomness, so the same
// state, jobs and time always give the same plan. Each job goes through a
// short pipeline: cheap filters (node ready, constraints, for a job with an
// image the node's container engine, allowed mounts and capabilities, GPU model and
// memory, --exclusive, free GPUs, CPUs, memory, the reservation), a scorer (binpack or
// spread, ties to a node that holds the job's image), and a pick, found
// through an index of nodes by free GPU count;
// inside the chosen node, BestGPUs picks the best-connected free GPUs
// (NVLink, then PCIe switch, then NUMA node).
// One accounting object, the ledger, hands out GPUs and can never hand one
// out twice. Every node a filter rejects is counted under a named reason,
// which becomes the job's blocked reason.
//
// Preemptions and Preemptor answer which running preemptible jobs to stop
// for a job that does not fit. Expired is the state GC policy: which
// finished jobs nothing needs any more. Autoscale decides an autoscaled
// service's replicas from the load per replica the leader observed.
// NextRolloutStep is a rolling update's next step: new replicas within the surge, old ones stopped
// once new ones are healthy, done, or a rollback when a new one fails or
// the rollout makes no progress by its spec's deadline. Autoscale pauses
// while a rollout is active.
//
// The plan is a proposal: the leader verifies it against the newest state
// and the FSM re-checks it in Apply.
package sched
