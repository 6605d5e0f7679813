package trust

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Identity is a node's TLS identity: its current certificate and key, and
// the CA certificates it trusts. The certificate can be swapped while
// connections are served (Renew); every method is safe for concurrent use.
type Identity struct {
	nodeID string
	roots  *x509.CertPool
	cur    atomic.Pointer[tls.Certificate]
}

// NewIdentity builds a node's identity from its certificate and key and
// the CA bundle, all PEM. It fails unless the key is the certificate's,
// the certificate names a node, and it chains to a CA of the bundle and is
// valid now.
func NewIdentity(certPEM, keyPEM, caBundlePEM []byte) (*Identity, error) {
	roots, err := caPool(caBundlePEM)
	if err != nil {
		return nil, err
	}
	id := &Identity{roots: roots}
	cert, nodeID, err := id.load(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	id.nodeID = nodeID
	id.cur.Store(cert)
	return id, nil
}

// Renew replaces the certificate and key the node presents from now on.
// The new certificate must pass NewIdentity's checks and name the same
// node. Connections already made keep the certificate they started with.
func (id *Identity) Renew(certPEM, keyPEM []byte) error {
	cert, err := id.check(certPEM, keyPEM)
	if err != nil {
		return err
	}
	id.cur.Store(cert)
	return nil
}

// Check reports whether Renew would take certPEM and keyPEM, and changes
// nothing: a caller can save a renewed pair before the node presents it.
func (id *Identity) Check(certPEM, keyPEM []byte) error {
	_, err := id.check(certPEM, keyPEM)
	return err
}

func (id *Identity) check(certPEM, keyPEM []byte) (*tls.Certificate, error) {
	cert, nodeID, err := id.load(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("renew: %w", err)
	}
	if nodeID != id.nodeID {
		return nil, fmt.Errorf("renew node %s: %w %s", id.nodeID, ErrOtherNode, nodeID)
	}
	return cert, nil
}

// NodeID returns the node ID the identity's certificate names.
func (id *Identity) NodeID() string { return id.nodeID }

// Leaf returns the certificate the node presents now.
func (id *Identity) Leaf() *x509.Certificate { return id.cur.Load().Leaf }

// load checks a node certificate and key and returns them ready to
// present: the leaf followed by the CA that signed it, so that a client
// holding only a pin of the CA (PinnedTLS) can check it.
func (id *Identity) load(certPEM, keyPEM []byte) (*tls.Certificate, string, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, "", fmt.Errorf("parse node certificate: %w", err)
	}
	leaf := certs[0]
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, "", fmt.Errorf("parse node key: %w", err)
	}
	if !samePublicKey(leaf.PublicKey, key.Public()) {
		return nil, "", fmt.Errorf("node certificate: %w", ErrKeyMismatch)
	}
	nodeID, err := NodeIDOf(leaf)
	if err != nil {
		return nil, "", err
	}
	var chain []*x509.Certificate
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if chain, err = verifyChain(leaf, id.roots, usage); err != nil {
			return nil, "", fmt.Errorf("node %s: %w", nodeID, err)
		}
	}
	cert := &tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	return cert, nodeID, nil
}

// ServerTLS returns the configuration of a node's TLS server (Raft, the
// API between nodes). It presents the node's current certificate with its
// CA. clientCerts says whether clients must present a certificate; a
// certificate a client presents is always verified against the CA bundle
// (RequestClientCert is taken as VerifyClientCertIfGiven, and
// RequireAnyClientCert as RequireAndVerifyClientCert), and the handshake
// fails unless it names a node that revoked (nil: none) does not report
// revoked. Revocation is checked when a connection is made; callers that
// keep connections open check PeerNodeID against it again.
func (id *Identity) ServerTLS(revoked func(nodeID string) bool, clientCerts tls.ClientAuthType) *tls.Config {
	switch clientCerts {
	case tls.RequestClientCert:
		clientCerts = tls.VerifyClientCertIfGiven
	case tls.RequireAnyClientCert:
		clientCerts = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return id.cur.Load(), nil
		},
		ClientAuth: clientCerts,
		ClientCAs:  id.roots,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return nil // ClientAuth has decided whether that is allowed
			}
			if len(cs.VerifiedChains) == 0 {
				return fmt.Errorf("client certificate: %w", ErrNoPeerCert)
			}
			nodeID, err := NodeIDOf(cs.VerifiedChains[0][0])
			if err != nil {
				return fmt.Errorf("client certificate: %w", err)
			}
			return checkRevoked(nodeID, revoked)
		},
	}
}

// ClientTLS returns the configuration a node dials other nodes with. It
// presents the node's current certificate, and accepts a server only if
// its certificate chains to the CA bundle and names a node that revoked
// (nil: none) does not report revoked.
func (id *Identity) ClientTLS(revoked func(nodeID string) bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return id.cur.Load(), nil
		},
		// Nodes dial each other by IP address, and an address a node is
		// reached at (NAT, a second interface, a changed lease) need not be
		// one its certificate lists. What identifies a node is the node ID
		// its CA-signed certificate names, not a host name, so the standard
		// verification, which always checks the host name, is turned off
		// and VerifyConnection verifies the chain against the CA bundle
		// itself. InsecureSkipVerify never goes without VerifyConnection.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf, nodeID, err := verifyPeer(cs.PeerCertificates, id.roots)
			if err != nil {
				return err
			}
			if err := checkRevoked(nodeID, revoked); err != nil {
				return err
			}
			markVerified(leaf)
			return nil
		},
	}
}

// PinnedTLS returns the configuration a node that has not been admitted
// yet dials the cluster with, to hand over its join token: it accepts a
// server only if the chain it presents holds a CA certificate whose
// Fingerprint is fingerprint and the server's certificate is signed by
// that CA and names a node. It presents no certificate.
func PinnedTLS(fingerprint string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// As in ClientTLS: no host name check, VerifyConnection verifies.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if err := checkFingerprint(fingerprint); err != nil {
				return err
			}
			var pinned *x509.Certificate
			for i, c := range cs.PeerCertificates {
				if i > 0 && c.IsCA && Fingerprint(c) == fingerprint {
					pinned = c
					break
				}
			}
			if pinned == nil {
				return fmt.Errorf("%w %s", ErrPinMismatch, fingerprint)
			}
			roots := x509.NewCertPool()
			roots.AddCert(pinned)
			leaf, _, err := verifyPeer(cs.PeerCertificates, roots)
			if err != nil {
				return err
			}
			markVerified(leaf)
			return nil
		},
	}
}

// PeerNodeID returns the node ID of the verified peer of a connection made
// with a configuration of this package: on a server, from the chains the
// handshake verified; on a client, where ClientTLS and PinnedTLS verify in
// VerifyConnection and leave cs.VerifiedChains empty, from the leaf they
// verified. It fails with ErrNoPeerCert when the peer presented no
// certificate or it was not verified.
func PeerNodeID(cs *tls.ConnectionState) (string, error) {
	var leaf *x509.Certificate
	switch {
	case cs == nil:
	case len(cs.VerifiedChains) > 0:
		leaf = cs.VerifiedChains[0][0]
	case len(cs.PeerCertificates) > 0 && wasVerified(cs.PeerCertificates[0]):
		leaf = cs.PeerCertificates[0]
	}
	if leaf == nil {
		return "", ErrNoPeerCert
	}
	return NodeIDOf(leaf)
}

// caPool returns a pool of the CA certificates of a bundle, PEM.
func caPool(bundlePEM []byte) (*x509.CertPool, error) {
	cas, err := ParseCerts(bundlePEM)
	if err != nil {
		return nil, fmt.Errorf("parse CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		if !ca.IsCA {
			return nil, fmt.Errorf("parse CA bundle: %q: %w", ca.Subject.CommonName, ErrNotCA)
		}
		pool.AddCert(ca)
	}
	return pool, nil
}

// verifyChain verifies leaf, now, against roots for usage, and returns
// the chain from the leaf to its CA. Node certificates are signed by the
// CA directly, so no intermediate is taken from the peer.
func verifyChain(leaf *x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) ([]*x509.Certificate, error) {
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: time.Now(),
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	if err != nil {
		return nil, fmt.Errorf("verify certificate: %w", err)
	}
	return chains[0], nil
}

// verifyPeer verifies the certificate a server presented against roots and
// returns it with the node ID it names.
func verifyPeer(certs []*x509.Certificate, roots *x509.CertPool) (*x509.Certificate, string, error) {
	if len(certs) == 0 {
		return nil, "", fmt.Errorf("server: %w", ErrNoPeerCert)
	}
	leaf := certs[0]
	if _, err := verifyChain(leaf, roots, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, "", fmt.Errorf("server: %w", err)
	}
	nodeID, err := NodeIDOf(leaf)
	if err != nil {
		return nil, "", fmt.Errorf("server: %w", err)
	}
	return leaf, nodeID, nil
}

func checkRevoked(nodeID string, revoked func(string) bool) error {
	if revoked != nil && revoked(nodeID) {
		return fmt.Errorf("node %s: %w", nodeID, ErrRevoked)
	}
	return nil
}

// verifiedLeaves holds the server certificates ClientTLS and PinnedTLS
// verified, so that PeerNodeID can trust a client connection's leaf
// although cs.VerifiedChains is empty there. Keys are weak pointers: an
// entry goes when its certificate is garbage collected.
var verifiedLeaves sync.Map // weak.Pointer[x509.Certificate] -> struct{}

func markVerified(leaf *x509.Certificate) {
	key := weak.Make(leaf)
	if _, loaded := verifiedLeaves.LoadOrStore(key, struct{}{}); !loaded {
		runtime.AddCleanup(leaf, func(key weak.Pointer[x509.Certificate]) {
			verifiedLeaves.Delete(key)
		}, key)
	}
}

func wasVerified(leaf *x509.Certificate) bool {
	_, ok := verifiedLeaves.Load(weak.Make(leaf))
	return ok
}
