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
