package trust

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// CA lifetime and naming.
const (
	// CALifetime is how long a new CA is valid.
	CALifetime = 10 * 365 * 24 * time.Hour
	// caBackdate is how far before its creation a CA is valid, so nodes
	// whose clocks run a little behind accept it.
	caBackdate = time.Hour
	// caCNPrefix begins every CA's common name; a random suffix tells
	// clusters apart.
	caCNPrefix = "skein cluster CA "
	// fingerprintPrefix begins every Fingerprint.
	fingerprintPrefix = "sha256:"
)

// PEM block types.
const (
	pemCert = "CERTIFICATE"
	pemCSR  = "CERTIFICATE REQUEST"
	pemKey  = "PRIVATE KEY"
	pemEC   = "EC PRIVATE KEY"
)

// CA is the cluster's certificate authority: its certificate and, on the
// nodes that hold it, its private key.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// CertPEM is Cert, PEM encoded.
	CertPEM []byte
	// Key is the CA's private key. It never leaves the nodes that hold it.
	Key crypto.Signer
}

// NewCA creates a cluster CA: an ECDSA P-256 key and a self-signed
// certificate valid from an hour before now for CALifetime, that may sign
// node certificates (and no intermediate CA).
func NewCA(now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("generate CA name: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: caCNPrefix + hex.EncodeToString(suffix[:])},
		NotBefore:             now.Add(-caBackdate),
		NotAfter:              now.Add(CALifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new CA certificate: %w", err)
	}
	return &CA{Cert: cert, CertPEM: encodePEM(pemCert, der), Key: key}, nil
}

// KeyPEM returns the CA's private key, PKCS #8 PEM. Only the nodes that
// hold the CA key write it, to their own Store.
func (ca *CA) KeyPEM() ([]byte, error) {
	return marshalKey(ca.Key)
}

// ParseCA reads a CA from its certificate and private key, both PEM. When
// certPEM is a bundle, the first certificate is the CA's (the current one
// comes first). It fails unless that certificate is a CA and the key is
// its key.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	certs, err := ParseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	cert := certs[0]
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("parse CA certificate %q: %w", cert.Subject.CommonName, ErrNotCA)
	}
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("parse CA key: %w", err)
	}
	if !samePublicKey(cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("parse CA %q: %w", cert.Subject.CommonName, ErrKeyMismatch)
	}
	return &CA{Cert: cert, CertPEM: encodePEM(pemCert, cert.Raw), Key: key}, nil
}

// ParseCerts reads every certificate of a PEM bundle, in order. It fails
// on a PEM block that is not a certificate and when there is none.
func ParseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != pemCert {
			return nil, fmt.Errorf("unexpected PEM block %q: %w", block.Type, ErrNoCertificate)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, ErrNoCertificate
	}
	return certs, nil
}

// Fingerprint returns "sha256:" and the lowercase hex SHA-256 of a
// certificate's DER encoding. Join tokens pin the CA by it.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return fingerprintPrefix + hex.EncodeToString(sum[:])
}

// checkFingerprint returns ErrBadFingerprint unless fp has the form
// Fingerprint returns.
func checkFingerprint(fp string) error {
	h, ok := strings.CutPrefix(fp, fingerprintPrefix)
	if !ok || !isLowerHex(h, sha256.Size*2) {
		return fmt.Errorf("%w: want %s followed by %d lowercase hex characters", ErrBadFingerprint, fingerprintPrefix, sha256.Size*2)
	}
	return nil
}

// randomSerial returns a random positive 128-bit certificate serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("generate serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}

func encodePEM(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// samePublicKey reports whether two public keys are equal; every key type
// of the standard library implements Equal.
func samePublicKey(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

// isLowerHex reports whether s is n lowercase hex characters.
func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
