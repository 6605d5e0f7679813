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
//
// Ports. A job's MASTER_PORT is held only where it is used
// (structs.Job.NeedsMasterPort; ports.go):
//
//   - A gang of several nodes and a service's replica get theirs from the
//     leader, in the placement: every rank must know rank 0's port, and
//     the ingress a replica's. Only rank 0's node can see whether a
//     program skein does not run holds it, so that node binds it for a
//     moment before it starts rank 0 (checkMasterPortFree). When one
//     holds it, rank 0 is not started and the node reports the port busy
//     (AllocUpdate.PortBusy). The report is committed like any other, and
//     applying it moves every rank of the attempt to the next port of the
//     range no live gang holds (fsm's movePort): the choice is made in the
//     log, the same on every replica, and rank 0's node tries again with
//     it. Letting the node pick another port itself would leave the other
//     ranks with the old one; asking the leader to check cannot work, for
//     it cannot see the node's ports. All ranks agree because the port is
//     only ever read from the replicated allocation, and because the
//     others have not started yet: a rank above 0 of a gang starts only
//     once rank 0 has (rankZeroRuns), when its port was found free and can
//     no longer move, which costs a gang's other ranks one commit of
//     latency. A job never fails for a port another program holds, unless
//     every port of the range is held.
//   - Any other job holds no port of the range: its node finds one free
//     as it starts (freeLocalPort), for scripts that read MASTER_PORT on
//     one node. Nothing else depends on it, so nothing is agreed.
package node
