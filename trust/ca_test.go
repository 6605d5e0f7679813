package trust

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewCA_MakesSelfSignedP256CA(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	ca, err := NewCA(now)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid {
		t.Error("CA certificate is not marked as a CA")
	}
	if want := x509.KeyUsageCertSign | x509.KeyUsageCRLSign; c.KeyUsage != want {
		t.Errorf("key usage %v, want %v", c.KeyUsage, want)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("CA certificate is not self-signed: %v", err)
	}
	pub, ok := c.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key is %T, want ECDSA P-256", c.PublicKey)
	}
	if !c.NotBefore.Equal(now.Add(-time.Hour)) || !c.NotAfter.Equal(now.Add(CALifetime)) {
		t.Errorf("valid %v to %v, want %v to %v", c.NotBefore, c.NotAfter, now.Add(-time.Hour), now.Add(CALifetime))
	}
	suffix, ok := strings.CutPrefix(c.Subject.CommonName, "skein cluster CA ")
	if !ok || suffix == "" {
		t.Errorf("common name %q, want %q and a suffix", c.Subject.CommonName, "skein cluster CA ")
	}
	if c.SerialNumber.Sign() <= 0 || c.SerialNumber.BitLen() > 128 {
		t.Errorf("serial %v is not a positive 128-bit number", c.SerialNumber)
	}
	other, err := NewCA(now)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	if other.Cert.Subject.CommonName == c.Subject.CommonName || other.Cert.SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs share a name or a serial number")
	}
}

func TestCA_RoundTripsThroughPEM(t *testing.T) {
	ca := newTestCA(t)
	keyPEM, err := ca.KeyPEM()
	if err != nil {
		t.Fatalf("KeyPEM: %v", err)
	}
	got, err := ParseCA(ca.CertPEM, keyPEM)
	if err != nil {
		t.Fatalf("ParseCA: %v", err)
	}
	if !got.Cert.Equal(ca.Cert) || !bytes.Equal(got.CertPEM, ca.CertPEM) {
		t.Error("parsed CA certificate differs from the original")
	}
	if !got.Key.Public().(*ecdsa.PublicKey).Equal(ca.Key.Public()) {
		t.Error("parsed CA key differs from the original")
	}
	// The parsed CA signs certificates the original's certificate verifies.
	certPEM, _ := issue(t, got, newNodeID(t), time.Hour, time.Now())
	if err := mustParseCert(t, certPEM).CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("certificate signed by the parsed CA: %v", err)
	}
}

func TestParseCA_Refuses(t *testing.T) {
	ca := newTestCA(t)
	keyPEM, _ := ca.KeyPEM()
	otherKeyPEM, _ := newTestCA(t).KeyPEM()
	nodeCertPEM, nodeKeyPEM := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	tests := []struct {
		name            string
		certPEM, keyPEM []byte
		want            error
	}{
		{"key of another CA", ca.CertPEM, otherKeyPEM, ErrKeyMismatch},
		{"node certificate", nodeCertPEM, nodeKeyPEM, ErrNotCA},
		{"no certificate", nil, keyPEM, ErrNoCertificate},
		{"key that is not PEM", ca.CertPEM, []byte("not a key"), ErrBadKey},
		{"certificate in place of the key", ca.CertPEM, ca.CertPEM, ErrBadKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseCA(tt.certPEM, tt.keyPEM)
			if !errors.Is(err, tt.want) {
				t.Errorf("ParseCA error %v, want %v", err, tt.want)
			}
		})
	}
}

func TestParseCerts_ReadsEveryCertificateOfABundle(t *testing.T) {
	a, b := newTestCA(t), newTestCA(t)
	certs, err := ParseCerts(append(append([]byte{}, a.CertPEM...), b.CertPEM...))
	if err != nil {
		t.Fatalf("ParseCerts: %v", err)
	}
	if len(certs) != 2 || !certs[0].Equal(a.Cert) || !certs[1].Equal(b.Cert) {
		t.Errorf("got %d certificates, want the two CAs in order", len(certs))
	}
	keyPEM, _ := a.KeyPEM()
	for name, in := range map[string][]byte{
		"empty":             nil,
		"not PEM":           []byte("hello"),
		"a key in a bundle": append(append([]byte{}, a.CertPEM...), keyPEM...),
	} {
		if _, err := ParseCerts(in); !errors.Is(err, ErrNoCertificate) {
			t.Errorf("%s: ParseCerts error %v, want %v", name, err, ErrNoCertificate)
		}
	}
}

func TestFingerprint_IsSHA256OfTheDER(t *testing.T) {
	ca := newTestCA(t)
	sum := sha256.Sum256(ca.Cert.Raw)
	want := "sha256:" + hex.EncodeToString(sum[:])
	if got := Fingerprint(ca.Cert); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
	if err := checkFingerprint(want); err != nil {
		t.Errorf("checkFingerprint refuses a Fingerprint: %v", err)
	}
	if Fingerprint(newTestCA(t).Cert) == want {
		t.Error("two CAs share a fingerprint")
	}
}
