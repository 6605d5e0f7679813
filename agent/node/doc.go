// Package node holds what every node does for itself, leader or not: it
// registers its inventory, keeps its lease with the leader (and fences its
// jobs when it cannot), makes its processes match the allocations
// committed to it (the local loop), reports their progress (the
// reporter), watches its GPUs and reports their health, checks the health
// of its service replicas and reports it (checks.go), reports the load of
// autoscaled services to the leader (load.go), and announces its
// free GPUs by gossip. It acts only on applied state (docs/architecture.md, "Nothing starts
// from uncommitted state") and
// writes only through the leader.
package node
