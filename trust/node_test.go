package trust

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSignNode_IssuesANodeCertificate(t *testing.T) {
	ca := newTestCA(t)
	nodeID := newNodeID(t)
	key, _, err := NewKey()
	if err != nil {
		t.Fatalf("NewKey: %v", err)
	}
	ips := []net.IP{net.ParseIP("10.1.2.3"), net.ParseIP("fd00::7"), net.ParseIP("127.0.0.1")}
	csr, err := NewCSR(key, nodeID, ips)
	if err != nil {
		t.Fatalf("NewCSR: %v", err)
	}
	now := time.Now().Truncate(time.Second)
	certPEM, err := ca.SignNode(csr, nodeID, 24*time.Hour, now)
	if err != nil {
		t.Fatalf("SignNode: %v", err)
	}
	c := mustParseCert(t, certPEM)
	if err := c.CheckSignatureFrom(ca.Cert); err != nil {
		t.Errorf("not signed by the CA: %v", err)
	}
	if !c.PublicKey.(*ecdsa.PublicKey).Equal(key.Public()) {
		t.Error("certificate does not carry the CSR's key")
	}
	if c.Subject.CommonName != nodeID || !slices.Equal(c.Subject.OrganizationalUnit, []string{"skein-node"}) {
		t.Errorf("subject %v, want CN %s OU skein-node", c.Subject, nodeID)
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "skein://node/"+nodeID {
		t.Errorf("URIs %v, want [skein://node/%s]", c.URIs, nodeID)
	}
	var gotIPs []string
	for _, ip := range c.IPAddresses {
		gotIPs = append(gotIPs, ip.String())
	}
	if want := []string{"10.1.2.3", "fd00::7", "127.0.0.1", "::1"}; !slices.Equal(gotIPs, want) {
		t.Errorf("IP addresses %v, want %v", gotIPs, want)
	}
	if c.IsCA || c.KeyUsage != x509.KeyUsageDigitalSignature {
		t.Errorf("IsCA %v, key usage %v: want a leaf for digital signatures", c.IsCA, c.KeyUsage)
	}
	if want := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}; !slices.Equal(c.ExtKeyUsage, want) {
		t.Errorf("extended key usage %v, want %v", c.ExtKeyUsage, want)
	}
	if !c.NotBefore.Equal(now.Add(-time.Minute)) || !c.NotAfter.Equal(now.Add(24*time.Hour)) {
		t.Errorf("valid %v to %v, want a minute before now for 24h", c.NotBefore, c.NotAfter)
	}
	if c.SerialNumber.Sign() <= 0 {
		t.Errorf("serial %v is not positive", c.SerialNumber)
	}
	if got, err := NodeIDOf(c); err != nil || got != nodeID {
		t.Errorf("NodeIDOf = %q, %v; want %s", got, err, nodeID)
	}
}

func TestSignNode_NeverOutlivesTheCA(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	ca, err := NewCA(now.Add(-CALifetime + 48*time.Hour)) // expires in two days
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	certPEM, _ := issue(t, ca, newNodeID(t), MaxNodeTTL, now)
	if got := mustParseCert(t, certPEM).NotAfter; !got.Equal(ca.Cert.NotAfter) {
		t.Errorf("NotAfter %v, want the CA's %v", got, ca.Cert.NotAfter)
	}
	key, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	nodeID := newNodeID(t)
	csr, err := NewCSR(key, nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ca.SignNode(csr, nodeID, time.Hour, ca.Cert.NotAfter.Add(time.Minute))
	if !errors.Is(err, ErrCAExpired) {
		t.Errorf("signing after the CA expired: error %v, want %v", err, ErrCAExpired)
	}
}

func TestSignNode_OutputHoldsNoKey(t *testing.T) {
	ca := newTestCA(t)
	certPEM, _ := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	caKey := ca.Key.(*ecdsa.PrivateKey)
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	for rest := certPEM; len(rest) > 0; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			t.Errorf("SignNode output holds a %q block", block.Type)
		}
	}
	secret, _ := caKey.Bytes()
	if bytes.Contains(certPEM, secret) || bytes.Contains(certPEM, caKeyDER) {
		t.Error("SignNode output holds the CA's private key")
	}
}

func TestSignNode_Refuses(t *testing.T) {
	ca := newTestCA(t)
	nodeID, otherID := newNodeID(t), newNodeID(t)
	key, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csrFor := func(cn string, ips []net.IP) []byte {
		t.Helper()
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: cn}, IPAddresses: ips,
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	// A CSR for nodeID, rewritten to name otherID: its signature no
	// longer matches what it says.
	block, _ := pem.Decode(csrFor(nodeID, nil))
	tampered := pem.EncodeToMemory(&pem.Block{
		Type:  "CERTIFICATE REQUEST",
		Bytes: bytes.Replace(block.Bytes, []byte(nodeID), []byte(otherID), 1),
	})
	tooMany := make([]net.IP, MaxNodeIPs+1)
	for i := range tooMany {
		tooMany[i] = net.IPv4(10, 0, 0, byte(i+1))
	}
	weakKey, _ := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	der, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: nodeID}}, weakKey)
	weakCurve := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})

	tests := []struct {
		name   string
		csr    []byte
		nodeID string
		ttl    time.Duration
		want   error
		saying string
	}{
		{"tampered signature", tampered, otherID, time.Hour, ErrBadCSR, "signature"},
		{"CSR for another node", csrFor(otherID, nil), nodeID, time.Hour, ErrBadCSR, otherID},
		{"upper-case node ID", csrFor(strings.ToUpper(nodeID), nil), strings.ToUpper(nodeID), time.Hour, ErrBadNodeID, "node_id"},
		{"short node ID", csrFor(nodeID[:31], nil), nodeID[:31], time.Hour, ErrBadNodeID, "node_id"},
		{"node ID with a slash", csrFor(nodeID[:31]+"/", nil), nodeID[:31] + "/", time.Hour, ErrBadNodeID, "node_id"},
		{"empty node ID", csrFor("", nil), "", time.Hour, ErrBadNodeID, "node_id"},
		{"too many IPs", csrFor(nodeID, tooMany), nodeID, time.Hour, ErrTooManyIPs, "17"},
		{"ttl too short", csrFor(nodeID, nil), nodeID, MinNodeTTL - time.Second, ErrBadTTL, "59s"},
		{"ttl too long", csrFor(nodeID, nil), nodeID, MaxNodeTTL + time.Second, ErrBadTTL, "8760h0m1s"},
		{"not a CSR", ca.CertPEM, nodeID, time.Hour, ErrBadCSR, "CERTIFICATE REQUEST"},
		{"garbage", []byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"), nodeID, time.Hour, ErrBadCSR, ""},
		{"key on a weak curve", weakCurve, nodeID, time.Hour, ErrBadCSR, "P-224"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cert, err := ca.SignNode(tt.csr, tt.nodeID, tt.ttl, time.Now())
			if !errors.Is(err, tt.want) {
				t.Fatalf("SignNode error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.saying) {
				t.Errorf("error %q does not say %q", err, tt.saying)
			}
			if cert != nil {
				t.Error("SignNode returned a certificate with its error")
			}
		})
	}
}

func TestNewCSR_RefusesBadNodeIDAndTooManyIPs(t *testing.T) {
	key, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewCSR(key, "node-1", nil); !errors.Is(err, ErrBadNodeID) {
		t.Errorf("NewCSR with a bad node ID: error %v, want %v", err, ErrBadNodeID)
	}
	if _, err := NewCSR(key, newNodeID(t), make([]net.IP, MaxNodeIPs+1)); !errors.Is(err, ErrTooManyIPs) {
		t.Errorf("NewCSR with too many IPs: error %v, want %v", err, ErrTooManyIPs)
	}
}

func TestNodeIDOf_RefusesCertificatesThatDoNotNameANode(t *testing.T) {
	id := newNodeID(t)
	node := func(edit func(c *x509.Certificate)) *x509.Certificate {
		c := &x509.Certificate{
			Subject: pkix.Name{CommonName: id, OrganizationalUnit: []string{"skein-node"}},
			URIs:    []*url.URL{{Scheme: "skein", Host: "node", Path: "/" + id}},
		}
		edit(c)
		return c
	}
	if got, err := NodeIDOf(node(func(*x509.Certificate) {})); err != nil || got != id {
		t.Fatalf("NodeIDOf a well-formed node certificate = %q, %v; want %s", got, err, id)
	}
	other := newNodeID(t)
	tests := map[string]*x509.Certificate{
		"nil":        nil,
		"a CA":       node(func(c *x509.Certificate) { c.IsCA = true }),
		"no OU":      node(func(c *x509.Certificate) { c.Subject.OrganizationalUnit = nil }),
		"another OU": node(func(c *x509.Certificate) { c.Subject.OrganizationalUnit = []string{"admins"} }),
		"a second OU": node(func(c *x509.Certificate) {
			c.Subject.OrganizationalUnit = append(c.Subject.OrganizationalUnit, "admins")
		}),
		"bad common name":     node(func(c *x509.Certificate) { c.Subject.CommonName = "web-1" }),
		"no URI":              node(func(c *x509.Certificate) { c.URIs = nil }),
		"URI of other node":   node(func(c *x509.Certificate) { c.URIs[0].Path = "/" + other }),
		"two URIs":            node(func(c *x509.Certificate) { c.URIs = append(c.URIs, &url.URL{Scheme: "https", Host: "x"}) }),
		"URI with a query":    node(func(c *x509.Certificate) { c.URIs[0].RawQuery = "a=b" }),
		"URI of another kind": node(func(c *x509.Certificate) { c.URIs[0].Scheme = "spiffe" }),
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			if got, err := NodeIDOf(c); !errors.Is(err, ErrNotNodeCert) {
				t.Errorf("NodeIDOf = %q, %v; want %v", got, err, ErrNotNodeCert)
			}
		})
	}
}

func TestNeedsRenewal_AfterTwoThirdsOfTheLifetime(t *testing.T) {
	start := time.Date(2031, 5, 1, 0, 0, 0, 0, time.UTC)
	c := &x509.Certificate{NotBefore: start, NotAfter: start.Add(90 * time.Hour)}
	tests := []struct {
		name string
		at   time.Time
		want bool
	}{
		{"just issued", start, false},
		{"half way", start.Add(45 * time.Hour), false},
		{"just before two thirds", start.Add(60*time.Hour - time.Nanosecond), false},
		{"at two thirds", start.Add(60 * time.Hour), true},
		{"after two thirds", start.Add(61 * time.Hour), true},
		{"expired", start.Add(100 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsRenewal(c, tt.at); got != tt.want {
				t.Errorf("NeedsRenewal at %v = %v, want %v", tt.at.Sub(start), got, tt.want)
			}
		})
	}
}

func TestParseKey_ReadsPKCS8AndSEC1AndRefusesTheRest(t *testing.T) {
	key, keyPEM, err := NewKey()
	if err != nil {
		t.Fatalf("NewKey: %v", err)
	}
	got, err := ParseKey(keyPEM)
	if err != nil || !got.(*ecdsa.PrivateKey).Equal(key) {
		t.Fatalf("ParseKey(NewKey's PEM) = %v, %v; want the same key", got, err)
	}
	sec1, err := x509.MarshalECPrivateKey(key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	got, err = ParseKey(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}))
	if err != nil || !got.(*ecdsa.PrivateKey).Equal(key) {
		t.Errorf("ParseKey(SEC 1) = %v, %v; want the same key", got, err)
	}
	for name, in := range map[string][]byte{
		"empty":       nil,
		"certificate": newTestCA(t).CertPEM,
		"bad DER":     pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}}),
	} {
		if _, err := ParseKey(in); !errors.Is(err, ErrBadKey) {
			t.Errorf("ParseKey(%s): error %v, want %v", name, err, ErrBadKey)
		}
	}
}
