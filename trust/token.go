package trust

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Join token format.
const (
	// tokenPrefix begins every join token; its digit is the format's version.
	tokenPrefix   = "SKJ1"
	tokenIDLen    = 8  // hex characters
	tokenSecretSz = 32 // random bytes, base64url without padding
)

// JoinToken admits one node or more to a cluster. A user holds it whole
// (String); the cluster keeps only its ID and the hash of its secret
// (structs.JoinToken). The CA fingerprint lets the joining node check the
// server it hands the secret to (PinnedTLS).
type JoinToken struct {
	// ID names the token in listings and revocations; it is not secret.
	ID string
	// Secret proves possession of the token. It is never logged, and
	// never part of an error.
	Secret string
	// CAFingerprint is the Fingerprint of the cluster CA: "sha256:HEX".
	CAFingerprint string
}

// NewJoinToken makes a join token with a random ID and secret that pins
// the CA whose Fingerprint is caFingerprint.
func NewJoinToken(caFingerprint string) (JoinToken, error) {
	if err := checkFingerprint(caFingerprint); err != nil {
		return JoinToken{}, err
	}
	var id [tokenIDLen / 2]byte
	var secret [tokenSecretSz]byte
	if _, err := rand.Read(id[:]); err != nil {
		return JoinToken{}, fmt.Errorf("generate join token: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return JoinToken{}, fmt.Errorf("generate join token: %w", err)
	}
	return JoinToken{
		ID:            hex.EncodeToString(id[:]),
		Secret:        base64.RawURLEncoding.EncodeToString(secret[:]),
		CAFingerprint: caFingerprint,
	}, nil
}

// String returns the token as users hold it:
// SKJ1.<id>.<secret>.<CA fingerprint hex, without "sha256:">. It holds the
// secret: never log it.
func (t JoinToken) String() string {
	return strings.Join([]string{
		tokenPrefix, t.ID, t.Secret, strings.TrimPrefix(t.CAFingerprint, fingerprintPrefix),
	}, ".")
}

// ParseJoinToken reads a token String made, around which white space
// (a token read from a file) is ignored. Its errors say which part is
// wrong and never quote the token.
func ParseJoinToken(s string) (JoinToken, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if parts[0] != tokenPrefix {
		return JoinToken{}, fmt.Errorf("%w: it does not start with %q", ErrBadToken, tokenPrefix+".")
	}
	if len(parts) != 4 {
		return JoinToken{}, fmt.Errorf("%w: %d dot-separated parts, want 4 (%s.id.secret.fingerprint)", ErrBadToken, len(parts), tokenPrefix)
	}
	id, secret, fp := parts[1], parts[2], parts[3]
	if !isLowerHex(id, tokenIDLen) {
		return JoinToken{}, fmt.Errorf("%w: the id is not %d lowercase hex characters", ErrBadToken, tokenIDLen)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
	if err != nil || len(raw) != tokenSecretSz {
		return JoinToken{}, fmt.Errorf("%w: the secret is not %d bytes of unpadded base64url", ErrBadToken, tokenSecretSz)
	}
	if !isLowerHex(fp, sha256.Size*2) {
		return JoinToken{}, fmt.Errorf("%w: the CA fingerprint is not %d lowercase hex characters", ErrBadToken, sha256.Size*2)
	}
	return JoinToken{ID: id, Secret: secret, CAFingerprint: fingerprintPrefix + fp}, nil
}

// HashSecret returns the lowercase hex SHA-256 of a secret: a join
// token's, or the users' API token. The cluster stores only the hash.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// EqualHash compares two hashes in constant time (for equal lengths).
func EqualHash(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// ACL token format.
const (
	aclTokenPrefix = "SKA1"
	aclTokenIDLen  = 16 // hex characters (structs.ACLTokenIDLen)
)

// ACLToken is a user's API credential once a cluster has ACLs. A user
// holds it whole (String); the cluster keeps its ID, the hash of its
// secret, its user and role (structs.ACLToken).
type ACLToken struct {
	// ID names the token in listings, revocations and the audit log.
	ID string
	// Secret proves possession; never logged.
	Secret string
}

// NewACLToken makes an ACL token with a random ID and secret.
func NewACLToken() (ACLToken, error) {
	var id [aclTokenIDLen / 2]byte
	var secret [tokenSecretSz]byte
	if _, err := rand.Read(id[:]); err != nil {
		return ACLToken{}, fmt.Errorf("generate ACL token: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return ACLToken{}, fmt.Errorf("generate ACL token: %w", err)
	}
	return ACLToken{ID: hex.EncodeToString(id[:]), Secret: base64.RawURLEncoding.EncodeToString(secret[:])}, nil
}

// String returns the token as users hold it: SKA1.<id>.<secret>. It holds
// the secret: never log it.
func (t ACLToken) String() string {
	return strings.Join([]string{aclTokenPrefix, t.ID, t.Secret}, ".")
}

// LooksLikeACLToken reports whether s has an ACL token's prefix, to tell an
// ACL token from a cluster's plain API token.
func LooksLikeACLToken(s string) bool {
	return strings.HasPrefix(strings.TrimSpace(s), aclTokenPrefix+".")
}

// ParseACLToken reads a token String made, around which white space is
// ignored. Its errors say which part is wrong and never quote the token.
func ParseACLToken(s string) (ACLToken, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if parts[0] != aclTokenPrefix {
		return ACLToken{}, fmt.Errorf("%w: it does not start with %q", ErrBadACLToken, aclTokenPrefix+".")
	}
	if len(parts) != 3 {
		return ACLToken{}, fmt.Errorf("%w: %d dot-separated parts, want 3 (%s.id.secret)", ErrBadACLToken, len(parts), aclTokenPrefix)
	}
	if !isLowerHex(parts[1], aclTokenIDLen) {
		return ACLToken{}, fmt.Errorf("%w: the id is not %d lowercase hex characters", ErrBadACLToken, aclTokenIDLen)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(parts[2])
	if err != nil || len(raw) != tokenSecretSz {
		return ACLToken{}, fmt.Errorf("%w: the secret is not %d bytes of unpadded base64url", ErrBadACLToken, tokenSecretSz)
	}
	return ACLToken{ID: parts[1], Secret: parts[2]}, nil
}
