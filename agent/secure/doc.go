// Package secure runs a node's part in cluster trust
// (docs/architecture.md, "Security model"; DESIGN.md in this folder): its
// identity (a certificate from the cluster CA naming its node ID, renewed
// before it expires), its admission with a join token, and, on the
// leader, the admission of other nodes, join tokens, the hand-over of the
// CA key to nodes about to vote, and gossip keyring rotation.
//
// Who holds what: every node holds its own key and certificate and the CA
// bundle; the CA key is held by the node that created the cluster and by
// every node that became a Raft voter, which receives it from the leader
// over mutual TLS before its promotion. A leader is always a voter, so the
// leader can always sign. The replicated state holds certificates, hashes
// and the gossip keyring, never a private key.
package secure
