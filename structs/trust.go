package structs

import "time"

// The cluster's trust state (docs/architecture.md, "Security model"): what every node must agree on
// to admit nodes and to authenticate them. Private keys are never part of
// it: the CA key stays on the nodes that hold it, each node key on its node.

// Trust is the replicated trust state of a secure cluster. It is empty in
// a plaintext cluster (dev mode, loopback, --insecure-cluster).
type Trust struct {
	// CACerts are the cluster CA's certificates, PEM, the current one
	// first. Every node and CLI verifies peers against them.
	CACerts []string `json:"ca_certs"`
	// UserTokenHash is the SHA-256 (hex) of the API token users present;
	// the token itself is never stored.
	UserTokenHash string `json:"user_token_hash,omitempty"`
	// Keyring is the gossip keyring every admitted node installs.
	Keyring Keyring `json:"keyring"`
	// Founder is the node ID of the node that created the CA; it is
	// admitted by TrustInit itself.
	Founder string `json:"founder"`
	// InitAt is when the trust state was created (leader-stamped).
	InitAt time.Time `json:"init_at"`
	// KeyringDue is set when a node is revoked and cleared when a keyring
	// rotation begins: a revoked node still knows the gossip key, so
	// whichever node leads rotates it.
	KeyringDue bool `json:"keyring_due,omitempty"`
}

// Keyring is the gossip encryption keyring: Primary encrypts what a node
// sends; Primary, Next and every key in Others decrypt what it receives.
// Keys are base64 32-byte AES-256 keys. Generation grows by one with every
// change, so nodes can tell which keyring they have installed.
//
// A rotation takes three changes, each made once every live node has
// installed the one before: Next is added; Next becomes Primary and the
// old primary moves to Others; Others is emptied.
type Keyring struct {
	Primary    string   `json:"primary"`
	Next       string   `json:"next,omitempty"`
	Others     []string `json:"others,omitempty"`
	Generation uint64   `json:"generation"`
}

// Rotating reports whether a rotation is under way.
func (k Keyring) Rotating() bool { return k.Next != "" || len(k.Others) > 0 }

// Keys lists every key of the ring, Primary first, then Next, then Others.
func (k Keyring) Keys() []string {
	out := []string{k.Primary}
	if k.Next != "" {
		out = append(out, k.Next)
	}
	return append(out, k.Others...)
}

// JoinToken is the replicated record of a join token. The secret is kept
// only as its SHA-256 (hex); the token a user holds is made of the ID, the
// secret and the CA's fingerprint (trust.JoinToken).
type JoinToken struct {
	ID         string    `json:"id"`
	SecretHash string    `json:"secret_hash"`
	CreatedAt  time.Time `json:"created_at"`
	// ExpiresAt is when the token stops admitting nodes.
	ExpiresAt time.Time `json:"expires_at"`
	// MaxUses is how many nodes it may admit; 0 means no limit before it
	// expires. Uses counts the nodes it admitted.
	MaxUses     int       `json:"max_uses,omitempty"`
	Uses        int       `json:"uses"`
	Description string    `json:"description,omitempty"`
	Revoked     bool      `json:"revoked,omitempty"`
	RevokedAt   time.Time `json:"revoked_at,omitzero"`
}

// Admission records a node admitted to the cluster: by the founder's trust
// init, or by a join token.
type Admission struct {
	NodeID     string    `json:"node_id"`
	Name       string    `json:"name"`
	TokenID    string    `json:"token_id,omitempty"` // "" for the founder
	AdmittedAt time.Time `json:"admitted_at"`
	// Revoked nodes stay listed, so their certificates are refused and
	// their node IDs are never admitted again.
	Revoked   bool      `json:"revoked,omitempty"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
}

// TrustInitRequest creates the trust state of a new secure cluster. It is
// committed once, by the founding node; a second one is refused.
type TrustInitRequest struct {
	Trust Trust  `json:"trust"`
	Name  string `json:"name"` // the founder's node name
}

// JoinTokenRequest creates a join token (Token set, Revoke false) or revokes
// one (Revoke true, Token.ID and At set).
type JoinTokenRequest struct {
	Token  JoinToken `json:"token"`
	Revoke bool      `json:"revoke,omitempty"`
	At     time.Time `json:"at"`
}

// NodeAdmitRequest admits a node with a join token: the FSM refuses it
// unless the token exists, is not revoked, has not expired at At and has
// uses left, and the node ID was never admitted before. SecretHash is the
// hash of the secret the node presented, compared with the token's.
type NodeAdmitRequest struct {
	TokenID    string    `json:"token_id"`
	SecretHash string    `json:"secret_hash"`
	NodeID     string    `json:"node_id"`
	Name       string    `json:"name"`
	At         time.Time `json:"at"`
}

// NodeRevokeRequest revokes a node's admission: its certificate is refused
// from then on, and its node ID is never admitted again.
type NodeRevokeRequest struct {
	NodeID string    `json:"node_id"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// KeyringRequest replaces the gossip keyring. Generation must be the
// current generation plus one, so two rotations cannot interleave.
type KeyringRequest struct {
	Keyring Keyring `json:"keyring"`
}
