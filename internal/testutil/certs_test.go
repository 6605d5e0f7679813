package testutil

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/url"
	"testing"
	"time"
)

func TestCA_NodeCertVerifiesForBothEnds(t *testing.T) {
	ca := NewCA(t, "test CA")
	if block, _ := pem.Decode(ca.PEM); block == nil || !ca.Cert.IsCA || ca.Cert.Subject.CommonName != "test CA" {
		t.Fatalf("CA: PEM block %v, IsCA %v, CN %q", block, ca.Cert.IsCA, ca.Cert.Subject.CommonName)
	}
	cert := ca.NodeCert(t, "node-1", net.IPv4(127, 0, 0, 1))
	leaf := cert.Leaf
	if leaf.Subject.CommonName != "node-1" || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != "node-1" || len(leaf.IPAddresses) != 1 {
		t.Fatalf("leaf: CN %q, DNS %v, IPs %v", leaf.Subject.CommonName, leaf.DNSNames, leaf.IPAddresses)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		opts := x509.VerifyOptions{Roots: ca.Pool(), DNSName: "node-1", KeyUsages: []x509.ExtKeyUsage{usage}}
		if _, err := leaf.Verify(opts); err != nil {
			t.Errorf("verify for %v: %v", usage, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: NewCA(t, "other").Pool()}); err == nil {
		t.Error("verified against another CA")
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
}

func TestCA_IssueHonoursTheLeaf(t *testing.T) {
	ca := NewCA(t, "test CA")
	spiffe, _ := url.Parse("spiffe://skein/node/a")
	notAfter := time.Now().Add(-time.Minute).Truncate(time.Second)
	got := ca.Issue(t, Leaf{
		CommonName:         "a",
		OrganizationalUnit: []string{"ops"},
		URIs:               []*url.URL{spiffe},
		KeyUsage:           x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:        []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		NotBefore:          notAfter.Add(-time.Hour),
		NotAfter:           notAfter,
	})
	c := got.Cert
	if len(c.Subject.OrganizationalUnit) != 1 || c.Subject.OrganizationalUnit[0] != "ops" || len(c.URIs) != 1 || c.URIs[0].String() != spiffe.String() {
		t.Errorf("OU %v, URIs %v", c.Subject.OrganizationalUnit, c.URIs)
	}
	if c.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment || len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Errorf("KeyUsage %v, ExtKeyUsage %v", c.KeyUsage, c.ExtKeyUsage)
	}
	if !c.NotAfter.Equal(notAfter) {
		t.Errorf("NotAfter = %v, want %v", c.NotAfter, notAfter)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("an expired certificate verified")
	}
	if _, err := tls.X509KeyPair(got.CertPEM, got.KeyPEM); err != nil {
		t.Errorf("PEM pair: %v", err)
	}
}
