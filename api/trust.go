package api

import (
	"time"

	"github.com/skein-dev/skein/structs"
)

// Admission and trust (docs/architecture.md, "Security model"). A joining node calls POST /v1/admit
// with its join token and a certificate signing request; everything else
// here is the user API for join tokens, the CA and the gossip keyring, and
// the node-to-node calls a secure cluster adds.

// AdmitRequest is the body of POST /v1/admit. Token is the whole join
// token as `skein join-token create` printed it; CSR is the node's
// certificate signing request, PEM, naming NodeID.
type AdmitRequest struct {
	Token  string `json:"token"`
	NodeID string `json:"node_id"`
	Name   string `json:"name"`
	CSR    string `json:"csr"`
}

// AdmitResponse is what an admitted node needs to take part: its signed
// certificate, the CA bundle, the gossip keyring and the gossip addresses
// of members to join.
type AdmitResponse struct {
	Cert        string          `json:"cert"`
	CACerts     []string        `json:"ca_certs"`
	Keyring     structs.Keyring `json:"keyring"`
	GossipAddrs []string        `json:"gossip_addrs"`
}

// RenewRequest is the body of POST /v1/internal/renew: a node asks the
// leader to sign a new certificate for its own node ID (the one its current
// certificate names).
type RenewRequest struct {
	CSR string `json:"csr"`
}

// RenewResponse carries the renewed certificate.
type RenewResponse struct {
	Cert string `json:"cert"`
}

// CAKeyRequest is the body of POST /v1/internal/ca-key: the leader hands
// the CA key to a node before it becomes a Raft voter, so that every node
// that may lead can sign certificates.
type CAKeyRequest struct {
	Key string `json:"key"` // PEM
}

// CA is GET /v1/ca: the cluster CA's certificates, PEM, and the
// fingerprint (sha256:HEX of the current one) join tokens pin.
type CA struct {
	CACerts     []string `json:"ca_certs"`
	Fingerprint string   `json:"fingerprint"`
}

// JoinTokenCreateRequest is the body of POST /v1/join-tokens.
type JoinTokenCreateRequest struct {
	// TTL is how long the token admits nodes (0: DefaultJoinTokenTTL).
	TTL structs.Duration `json:"ttl,omitempty"`
	// Uses is how many nodes it may admit (0: no limit within its TTL).
	Uses        int    `json:"uses,omitempty"`
	Description string `json:"description,omitempty"`
}

// JoinTokenCreated answers POST /v1/join-tokens. Token is shown once: the
// cluster keeps only its hash.
type JoinTokenCreated struct {
	Token string    `json:"token"`
	Info  JoinToken `json:"info"`
}

// JoinToken is one entry of GET /v1/join-tokens: a token without its secret.
type JoinToken struct {
	ID          string    `json:"id"`
	CreatedAt   time.Time `json:"created_at"`
	ExpiresAt   time.Time `json:"expires_at"`
	MaxUses     int       `json:"max_uses,omitempty"`
	Uses        int       `json:"uses"`
	Description string    `json:"description,omitempty"`
	Revoked     bool      `json:"revoked,omitempty"`
	// State is active, expired, used_up or revoked.
	State string `json:"state"`
}

// Join token limits.
const (
	DefaultJoinTokenTTL = 24 * time.Hour
	MaxJoinTokenTTL     = 365 * 24 * time.Hour
	MaxJoinTokenUses    = 100000
)

// KeyringStatus is GET /v1/keyring and the answer to POST
// /v1/keyring/rotate: the generation installed cluster-wide, how many keys
// the ring holds, and whether a rotation is under way. Keys are never shown.
type KeyringStatus struct {
	Generation uint64 `json:"generation"`
	Keys       int    `json:"keys"`
	Rotating   bool   `json:"rotating"`
	// Nodes maps node names to the keyring generation each has installed.
	Nodes map[string]uint64 `json:"nodes,omitempty"`
}

// NodeRevokeRequest is the body of POST /v1/nodes/{id}/revoke.
type NodeRevokeRequest struct {
	Reason string `json:"reason,omitempty"`
}

// NodeRevokeResult is the answer to a revocation: how far cutting the node
// off had come when the node asked answered. A revocation is done once the
// node is out of Raft, the gossip keyring has been rotated without it (it
// knows no key left in use), and gossip refuses it; its connections to
// every node are closed as each applies the revocation.
type NodeRevokeResult struct {
	NodeID string `json:"node_id"`
	// OutOfRaft is whether it is out of the Raft configuration.
	OutOfRaft bool `json:"out_of_raft"`
	// KeyringGeneration is the keyring's generation then; Rotated
	// whether the rotation the revocation began is over.
	KeyringGeneration uint64 `json:"keyring_generation"`
	Rotated           bool   `json:"rotated"`
	// Refused is whether the answering node's gossip holds it as
	// revoked, or no longer holds it.
	Refused bool `json:"refused"`
	// Done is all of these; Waiting says what was not yet when it is
	// not.
	Done    bool   `json:"done"`
	Waiting string `json:"waiting,omitempty"`
}
