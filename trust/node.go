package trust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"time"
)

// Node certificate limits and naming.
const (
	// MinNodeTTL and MaxNodeTTL bound a node certificate's lifetime.
	MinNodeTTL = time.Minute
	MaxNodeTTL = 365 * 24 * time.Hour
	// MaxNodeIPs is how many IP addresses a CSR may ask for; the
	// loopback addresses SignNode adds do not count.
	MaxNodeIPs = 16
	// NodeOU is the organizational unit of every node certificate.
	NodeOU = "skein-node"
	// nodeIDLen is the length of a node ID (structs.NewID: 128 bits, hex).
	nodeIDLen = 32
	// nodeBackdate is how far before its signing a node certificate is
	// valid, for clocks a little behind the signer's.
	nodeBackdate = time.Minute
	// nodeURIScheme and nodeURIHost make a node certificate's URI SAN:
	// skein://node/<node ID>.
	nodeURIScheme = "skein"
	nodeURIHost   = "node"
)

// NewKey generates a node's ECDSA P-256 private key and returns it with
// its PKCS #8 PEM encoding. The key never leaves the node.
func NewKey() (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	keyPEM, err := marshalKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, keyPEM, nil
}

// ParseKey reads a private key, PEM: PKCS #8 ("PRIVATE KEY") or SEC 1
// ("EC PRIVATE KEY").
func ParseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrBadKey)
	}
	var (
		key any
		err error
	)
	switch block.Type {
	case pemKey:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case pemEC:
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%w: unexpected PEM block %q", ErrBadKey, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKey, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: %T cannot sign", ErrBadKey, key)
	}
	return signer, nil
}

func marshalKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return encodePEM(pemKey, der), nil
}

// NewCSR returns a certificate signing request, PEM, for the node nodeID
// (its subject's common name) and the IP addresses the node is reached at.
func NewCSR(key crypto.Signer, nodeID string, ips []net.IP) ([]byte, error) {
	if err := checkNodeID(nodeID); err != nil {
		return nil, err
	}
	if len(ips) > MaxNodeIPs {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyIPs, len(ips), MaxNodeIPs)
	}
	tmpl := &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: nodeID},
		IPAddresses: ips,
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate request: %w", err)
	}
	return encodePEM(pemCSR, der), nil
}

// SignNode signs a node certificate for nodeID from the node's CSR, PEM,
// valid from a minute before now for ttl (but never past the CA's own
// expiry). It checks the CSR's signature, that it names nodeID, that
// nodeID is well formed, that the CSR asks for at most MaxNodeIPs IP
// addresses and that ttl is within MinNodeTTL..MaxNodeTTL. The
// certificate serves both ends of mutual TLS and names the node three
// ways that NodeIDOf checks agree: common name, OU NodeOU and the URI
// skein://node/<nodeID>. Its IP addresses are the CSR's and the loopback
// ones; everything else the CSR asks for is ignored. It returns the
// certificate alone, PEM.
func (ca *CA) SignNode(csrPEM []byte, nodeID string, ttl time.Duration, now time.Time) ([]byte, error) {
	if err := checkNodeID(nodeID); err != nil {
		return nil, err
	}
	if ttl < MinNodeTTL || ttl > MaxNodeTTL {
		return nil, fmt.Errorf("%w: %v, want %v to %v", ErrBadTTL, ttl, MinNodeTTL, MaxNodeTTL)
	}
	csr, err := parseCSR(csrPEM)
	if err != nil {
		return nil, err
	}
	if csr.Subject.CommonName != nodeID {
		return nil, fmt.Errorf("%w: it names %q, not node %s", ErrBadCSR, csr.Subject.CommonName, nodeID)
	}
	if len(csr.IPAddresses) > MaxNodeIPs {
		return nil, fmt.Errorf("%w: %d, at most %d", ErrTooManyIPs, len(csr.IPAddresses), MaxNodeIPs)
	}
	notBefore, notAfter := now.Add(-nodeBackdate), now.Add(ttl)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(now) {
		return nil, fmt.Errorf("sign certificate for node %s: %w at %v", nodeID, ErrCAExpired, ca.Cert.NotAfter)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: nodeID, OrganizationalUnit: []string{NodeOU}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  withLoopback(csr.IPAddresses),
		URIs:         []*url.URL{nodeURI(nodeID)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for node %s: %w", nodeID, err)
	}
	return encodePEM(pemCert, der), nil
}

// parseCSR decodes a CSR, checks its signature and that its key is of a
// kind TLS 1.3 uses.
func parseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != pemCSR {
		return nil, fmt.Errorf("%w: no %s PEM block", ErrBadCSR, pemCSR)
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadCSR, err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: signature: %w", ErrBadCSR, err)
	}
	switch pub := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() {
			return nil, fmt.Errorf("%w: ECDSA curve %s, want P-256 or P-384", ErrBadCSR, pub.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("%w: %T key, want ECDSA or Ed25519", ErrBadCSR, pub)
	}
	return csr, nil
}

// withLoopback returns ips, without duplicates, and the loopback
// addresses 127.0.0.1 and ::1.
func withLoopback(ips []net.IP) []net.IP {
	out := make([]net.IP, 0, len(ips)+2)
	for _, ip := range append(ips[:len(ips):len(ips)], net.IPv4(127, 0, 0, 1), net.IPv6loopback) {
		dup := false
		for _, seen := range out {
			if seen.Equal(ip) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, ip)
		}
	}
	return out
}

func nodeURI(nodeID string) *url.URL {
	return &url.URL{Scheme: nodeURIScheme, Host: nodeURIHost, Path: "/" + nodeID}
}

// checkNodeID returns ErrBadNodeID, naming the field, unless id is a
// node ID as structs.NewID makes them.
func checkNodeID(id string) error {
	if !isLowerHex(id, nodeIDLen) {
		return fmt.Errorf("%w: node_id %q: want %d lowercase hex characters", ErrBadNodeID, clip(id), nodeIDLen)
	}
	return nil
}

// clip shortens untrusted input quoted in an error.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

// NodeIDOf returns the node ID a node certificate names. It fails unless
// the certificate is a leaf whose only OU is NodeOU, whose common name is
// a well-formed node ID and whose only URI is skein://node/<that ID>. It
// does not verify the certificate's signature: callers check the chain.
func NodeIDOf(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", fmt.Errorf("%w: no certificate", ErrNotNodeCert)
	}
	if cert.IsCA {
		return "", fmt.Errorf("%w: it is a CA", ErrNotNodeCert)
	}
	if ou := cert.Subject.OrganizationalUnit; len(ou) != 1 || ou[0] != NodeOU {
		return "", fmt.Errorf("%w: OU %q, want [%s]", ErrNotNodeCert, ou, NodeOU)
	}
	id := cert.Subject.CommonName
	if err := checkNodeID(id); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotNodeCert, err)
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != nodeURI(id).String() {
		return "", fmt.Errorf("%w: URIs %v, want [%s]", ErrNotNodeCert, cert.URIs, nodeURI(id))
	}
	return id, nil
}

// NeedsRenewal reports whether two thirds of a certificate's lifetime,
// from NotBefore to NotAfter, have passed at now.
func NeedsRenewal(cert *x509.Certificate, now time.Time) bool {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return !now.Before(cert.NotBefore.Add(2 * life / 3))
}
