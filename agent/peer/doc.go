// Package peer is how a node finds and reaches the other nodes: what every
// node announces about itself by gossip, the members as gossip sees them,
// the leader (waited for through an election), and the HTTP clients for
// calls between nodes (forwarded writes, reports to the leader, streamed
// logs). It decides nothing; the node, leader and server parts of the
// agent use it.
package peer
