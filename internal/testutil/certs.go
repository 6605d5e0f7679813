package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"
)

// CA is a throwaway certificate authority for TLS tests: a self-signed
// P-256 certificate and its key, held in memory only.
type CA struct {
	// Cert is the CA's parsed certificate.
	Cert *x509.Certificate
	// Key is the CA's private key.
	Key *ecdsa.PrivateKey
	// PEM is Cert as one PEM "CERTIFICATE" block, as a CA bundle file
	// holds it.
	PEM []byte
}

// NewCA creates a self-signed CA whose common name is name, valid from an
// hour ago to an hour from now, able to sign certificates. Any failure
// fails the test.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, nil)
}

// Intermediate creates a CA whose certificate ca signs: what a chain of
// two CAs looks like, which skein's clients must not take from a server.
func (ca *CA) Intermediate(t testing.TB, name string) *CA {
	t.Helper()
	return newCA(t, name, ca)
}

// newCA creates a CA signed by parent, or by itself when parent is nil.
func newCA(t testing.TB, name string, parent *CA) *CA {
	key := newKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.Cert, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatalf("testutil: creating CA %q: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testutil: parsing CA %q: %v", name, err)
	}
	return &CA{Cert: cert, Key: key, PEM: pemBlock("CERTIFICATE", der)}
}

// Pool returns a new certificate pool holding only the CA, for a
// tls.Config's RootCAs or ClientCAs.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// Leaf describes a certificate for CA.Issue to sign. Zero fields take the
// defaults their comments give.
type Leaf struct {
	CommonName         string
	OrganizationalUnit []string
	DNSNames           []string
	IPAddresses        []net.IP
	URIs               []*url.URL
	// KeyUsage defaults to x509.KeyUsageDigitalSignature.
	KeyUsage x509.KeyUsage
	// ExtKeyUsage defaults to both server and client authentication.
	ExtKeyUsage []x509.ExtKeyUsage
	// NotBefore defaults to an hour ago, NotAfter to an hour from now.
	NotBefore, NotAfter time.Time
}

// Issued is a certificate a CA signed, with its fresh P-256 key.
type Issued struct {
	// Cert is the parsed certificate.
	Cert *x509.Certificate
	// Key is its private key.
	Key *ecdsa.PrivateKey
	// CertPEM and KeyPEM are the certificate and the key (PKCS #8) in PEM.
	CertPEM, KeyPEM []byte
	// TLS is the certificate and key ready for a tls.Config.
	TLS tls.Certificate
}

// Issue signs a certificate for l with a new key. Any failure fails the
// test.
func (ca *CA) Issue(t testing.TB, l Leaf) *Issued {
	t.Helper()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: newSerial(t),
		Subject:      pkix.Name{CommonName: l.CommonName, OrganizationalUnit: l.OrganizationalUnit},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPAddresses,
		URIs:         l.URIs,
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     l.KeyUsage,
		ExtKeyUsage:  l.ExtKeyUsage,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.Add(time.Hour)
	}
	if tmpl.KeyUsage == 0 {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	if tmpl.ExtKeyUsage == nil {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatalf("testutil: issuing a certificate for %q: %v", l.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testutil: parsing the certificate for %q: %v", l.CommonName, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testutil: encoding the key for %q: %v", l.CommonName, err)
	}
	return &Issued{
		Cert:    cert,
		Key:     key,
		CertPEM: pemBlock("CERTIFICATE", der),
		KeyPEM:  pemBlock("PRIVATE KEY", keyDER),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}
}

// NodeCert issues a certificate such as a cluster node holds: its common
// name and only DNS name are id, with the IP addresses ips if any, good for
// both ends of a connection and valid from an hour ago to an hour from now.
func (ca *CA) NodeCert(t testing.TB, id string, ips ...net.IP) tls.Certificate {
	t.Helper()
	return ca.Issue(t, Leaf{CommonName: id, DNSNames: []string{id}, IPAddresses: ips}).TLS
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testutil: generating a key: %v", err)
	}
	return key
}

// newSerial returns a random positive serial number, so that no two
// certificates a test makes share one.
func newSerial(t testing.TB) *big.Int {
	t.Helper()
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("testutil: generating a serial number: %v", err)
	}
	return serial.Add(serial, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
