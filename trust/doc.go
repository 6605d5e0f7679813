// Package trust is the cluster's public-key infrastructure: it creates the
// cluster CA, signs node certificates from certificate signing requests,
// keeps keys and certificates on disk, builds the TLS configurations for
// mutual TLS between nodes, for users' CLIs and for a node that is joining,
// and makes and parses join tokens (docs/architecture.md, "Security
// model").
//
// Who holds what: the CA key stays on the nodes that hold it (the founder,
// and the voters the leader hands it to so that any of them can sign); a
// node's private key is made on that node and never leaves it, only its
// CSR does; the cluster replicates only certificates and hashes (the CA
// bundle, the SHA-256 of join token secrets and of the user API token).
// A join token carries the CA's fingerprint, so a joining node can check
// the server it hands its secret to before it holds the CA itself.
//
// The package is pure: it does no network I/O and imports no other skein
// package. Node IDs are those of structs.NewID: 32 lowercase hex
// characters.
package trust
