package trust

import "errors"

// Sentinel errors. Every error the package returns wraps one of them, or
// an error from crypto/x509 or the file system (os.ErrNotExist included),
// so callers can tell the cases apart with errors.Is and errors.As.
var (
	// ErrNoCertificate means PEM input held no certificate.
	ErrNoCertificate = errors.New("no certificate")
	// ErrNotCA means a certificate that must be a CA is not one.
	ErrNotCA = errors.New("certificate is not a CA")
	// ErrBadKey means a private key could not be parsed or is of a kind
	// the package does not use.
	ErrBadKey = errors.New("invalid private key")
	// ErrKeyMismatch means a private key is not the one of its certificate.
	ErrKeyMismatch = errors.New("private key does not match the certificate")
	// ErrBadCSR means a certificate signing request is malformed, its
	// signature does not verify, or it asks for something not allowed.
	ErrBadCSR = errors.New("invalid certificate request")
	// ErrBadNodeID means a node ID is not 32 lowercase hex characters.
	ErrBadNodeID = errors.New("invalid node ID")
	// ErrTooManyIPs means a request names more than MaxNodeIPs addresses.
	ErrTooManyIPs = errors.New("too many IP addresses")
	// ErrBadTTL means a certificate lifetime is outside MinNodeTTL..MaxNodeTTL.
	ErrBadTTL = errors.New("certificate lifetime out of range")
	// ErrCAExpired means the CA is not valid long enough to sign.
	ErrCAExpired = errors.New("CA certificate expired")
	// ErrNotNodeCert means a certificate does not name a skein node.
	ErrNotNodeCert = errors.New("certificate does not name a node")
	// ErrOtherNode means a certificate names another node than expected.
	ErrOtherNode = errors.New("certificate names another node")
	// ErrRevoked means a peer's node ID has been revoked.
	ErrRevoked = errors.New("node is revoked")
	// ErrNoPeerCert means a peer presented no verified node certificate.
	ErrNoPeerCert = errors.New("peer presented no verified node certificate")
	// ErrBadFingerprint means a CA fingerprint is not "sha256:" and 64
	// lowercase hex characters.
	ErrBadFingerprint = errors.New("invalid CA fingerprint")
	// ErrPinMismatch means a server did not present the pinned CA.
	ErrPinMismatch = errors.New("server does not present the pinned CA")
	// ErrBadToken means a join token is malformed.
	ErrBadToken = errors.New("invalid join token")
	// ErrBadACLToken means an ACL token is malformed.
	ErrBadACLToken = errors.New("invalid ACL token")
	// ErrKeyFileMode means a key file may be read by other users.
	ErrKeyFileMode = errors.New("key file permissions too open")
)
