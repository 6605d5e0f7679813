// Package agent is a skein node. It wires the parts together and owns
// nothing else: the data dir and node ID, the replicated state (fsm), Raft
// and gossip (cluster), and one room per role:
//
//   - agent/leader: what a node does while it leads (scheduling passes,
//     committing plans, the node monitor, removing expired jobs);
//   - agent/node: what every node does for itself (registration, the
//     lease, the local loop and reporter, GPU health, its replicas'
//     health checks, its gossip
//     announcement, removing the directories of dropped allocations);
//   - agent/server: the HTTP surface, the user API and the node-to-node
//     API on separate routers, each behind its own Authenticator;
//   - agent/ingress: every node's proxy to the cluster's services, on
//     its own port, behind the user API's authenticator;
//   - agent/peer: how nodes find and reach one another;
//   - agent/runner: the supervisor that runs one allocation, and its
//     drivers.
//
// See DESIGN.md in this folder for how they fit.
package agent
