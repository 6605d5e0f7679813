package trust

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"testing"
	"time"
)

// is returns a check that err wraps target.
func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// unknownCA reports whether err is x509's "signed by unknown authority".
func unknownCA(err error) bool {
	var unknown x509.UnknownAuthorityError
	return errors.As(err, &unknown)
}

// never is a revocation list that revokes no node.
func never(string) bool { return false }

// revokedSet returns a revocation list of the given node IDs.
func revokedSet(ids ...string) func(string) bool {
	return func(id string) bool {
		for _, r := range ids {
			if r == id {
				return true
			}
		}
		return false
	}
}

func TestTLS_NodesAuthenticateEachOther(t *testing.T) {
	ca := newTestCA(t)
	server, client := newTestIdentity(t, ca), newTestIdentity(t, ca)
	r := handshake(t, server.ServerTLS(never, tls.RequireAndVerifyClientCert), client.ClientTLS(never))
	if r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("handshake: server %v, client %v", r.serverErr, r.clientErr)
	}
	if r.server.Version != tls.VersionTLS13 {
		t.Errorf("negotiated version %x, want TLS 1.3", r.server.Version)
	}
	if got, err := PeerNodeID(&r.server); err != nil || got != client.NodeID() {
		t.Errorf("server side PeerNodeID = %q, %v; want the client's %s", got, err, client.NodeID())
	}
	if got, err := PeerNodeID(&r.client); err != nil || got != server.NodeID() {
		t.Errorf("client side PeerNodeID = %q, %v; want the server's %s", got, err, server.NodeID())
	}
	// The server sends its CA with its certificate, for pinned clients.
	if n := len(r.client.PeerCertificates); n != 2 || Fingerprint(r.client.PeerCertificates[1]) != Fingerprint(ca.Cert) {
		t.Errorf("server presented %d certificates, want its own and the CA", n)
	}
}

func TestTLS_RefusesCertificateOfAnotherCA(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	bundleBoth := append(append([]byte{}, ca.CertPEM...), other.CertPEM...)
	certPEM, keyPEM := issue(t, other, newNodeID(t), time.Hour, time.Now())
	// The stranger's own identity trusts both CAs, so it can talk; only
	// the other end's trust is under test.
	stranger, err := NewIdentity(certPEM, keyPEM, bundleBoth)
	if err != nil {
		t.Fatalf("NewIdentity: %v", err)
	}
	member := newTestIdentity(t, ca)

	t.Run("client of another CA", func(t *testing.T) {
		r := handshake(t, member.ServerTLS(never, tls.RequireAndVerifyClientCert), stranger.ClientTLS(never))
		if r.serverErr == nil || r.clientErr == nil {
			t.Errorf("handshake: server %v, client %v; want both to fail", r.serverErr, r.clientErr)
		}
	})
	t.Run("client of another CA when certificates are optional", func(t *testing.T) {
		r := handshake(t, member.ServerTLS(never, tls.RequestClientCert), stranger.ClientTLS(never))
		if r.serverErr == nil {
			t.Error("server accepted a client certificate of another CA")
		}
	})
	t.Run("server of another CA", func(t *testing.T) {
		r := handshake(t, stranger.ServerTLS(never, tls.RequireAndVerifyClientCert), member.ClientTLS(never))
		if !unknownCA(r.clientErr) {
			t.Errorf("client error %v, want an unknown authority", r.clientErr)
		}
	})
}

func TestTLS_RefusesRevokedNode(t *testing.T) {
	ca := newTestCA(t)
	server, client := newTestIdentity(t, ca), newTestIdentity(t, ca)
	t.Run("revoked client", func(t *testing.T) {
		r := handshake(t, server.ServerTLS(revokedSet(client.NodeID()), tls.RequireAndVerifyClientCert), client.ClientTLS(never))
		if !errors.Is(r.serverErr, ErrRevoked) {
			t.Errorf("server error %v, want %v", r.serverErr, ErrRevoked)
		}
		if r.clientErr == nil {
			t.Error("revoked client was not told")
		}
	})
	t.Run("revoked server", func(t *testing.T) {
		r := handshake(t, server.ServerTLS(never, tls.RequireAndVerifyClientCert), client.ClientTLS(revokedSet(server.NodeID())))
		if !errors.Is(r.clientErr, ErrRevoked) {
			t.Errorf("client error %v, want %v", r.clientErr, ErrRevoked)
		}
	})
	t.Run("another node revoked", func(t *testing.T) {
		r := handshake(t, server.ServerTLS(revokedSet(newNodeID(t)), tls.RequireAndVerifyClientCert), client.ClientTLS(revokedSet(newNodeID(t))))
		if r.serverErr != nil || r.clientErr != nil {
			t.Errorf("handshake: server %v, client %v", r.serverErr, r.clientErr)
		}
	})
}

func TestTLS_RefusesExpiredCertificate(t *testing.T) {
	ca := newTestCA(t)
	member := newTestIdentity(t, ca)
	// Signed two hours ago for a minute: expired an hour and 59 minutes ago.
	certPEM, keyPEM := issue(t, ca, newNodeID(t), MinNodeTTL, time.Now().Add(-2*time.Hour))
	expired := rawTLS(t, append(certPEM, ca.CertPEM...), keyPEM)
	var invalid x509.CertificateInvalidError

	t.Run("expired client", func(t *testing.T) {
		r := handshake(t, member.ServerTLS(never, tls.RequireAndVerifyClientCert), expired)
		if !errors.As(r.serverErr, &invalid) || invalid.Reason != x509.Expired {
			t.Errorf("server error %v, want an expired certificate", r.serverErr)
		}
	})
	t.Run("expired server", func(t *testing.T) {
		r := handshake(t, expired, member.ClientTLS(never))
		if !errors.As(r.clientErr, &invalid) || invalid.Reason != x509.Expired {
			t.Errorf("client error %v, want an expired certificate", r.clientErr)
		}
	})
	if _, err := NewIdentity(certPEM, keyPEM, ca.CertPEM); !errors.As(err, &invalid) {
		t.Errorf("NewIdentity with an expired certificate: error %v, want an expired certificate", err)
	}
}

// signNotANode has ca sign a TLS certificate for both ends that does not
// name a node (another OU), and returns it with the CA, and its key.
func signNotANode(t *testing.T, ca *CA) (chainPEM, keyPEM []byte) {
	t.Helper()
	key, keyPEM, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	id := newNodeID(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: id, OrganizationalUnit: []string{"skein-user"}},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{{Scheme: "skein", Host: "node", Path: "/" + id}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM...), keyPEM
}

func TestTLS_RefusesCertificateNotNamingANode(t *testing.T) {
	ca := newTestCA(t)
	member := newTestIdentity(t, ca)
	chainPEM, keyPEM := signNotANode(t, ca)
	notNode := rawTLS(t, chainPEM, keyPEM)

	t.Run("client", func(t *testing.T) {
		r := handshake(t, member.ServerTLS(never, tls.RequireAndVerifyClientCert), notNode)
		if !errors.Is(r.serverErr, ErrNotNodeCert) {
			t.Errorf("server error %v, want %v", r.serverErr, ErrNotNodeCert)
		}
	})
	t.Run("server", func(t *testing.T) {
		r := handshake(t, notNode, member.ClientTLS(never))
		if !errors.Is(r.clientErr, ErrNotNodeCert) {
			t.Errorf("client error %v, want %v", r.clientErr, ErrNotNodeCert)
		}
	})
	t.Run("server to a joining node", func(t *testing.T) {
		r := handshake(t, notNode, PinnedTLS(Fingerprint(ca.Cert)))
		if !errors.Is(r.clientErr, ErrNotNodeCert) {
			t.Errorf("client error %v, want %v", r.clientErr, ErrNotNodeCert)
		}
	})
}

func TestServerTLS_ClientCertificateModes(t *testing.T) {
	ca := newTestCA(t)
	server := newTestIdentity(t, ca)
	anonymous := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true}

	r := handshake(t, server.ServerTLS(never, tls.RequireAndVerifyClientCert), anonymous)
	if r.serverErr == nil {
		t.Error("a server that requires client certificates accepted a client without one")
	}
	r = handshake(t, server.ServerTLS(never, tls.VerifyClientCertIfGiven), anonymous)
	if r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("anonymous client where certificates are optional: server %v, client %v", r.serverErr, r.clientErr)
	}
	if id, err := PeerNodeID(&r.server); !errors.Is(err, ErrNoPeerCert) {
		t.Errorf("PeerNodeID of an anonymous client = %q, %v; want %v", id, err, ErrNoPeerCert)
	}
	r = handshake(t, server.ServerTLS(never, tls.NoClientCert), newTestIdentity(t, ca).ClientTLS(never))
	if r.serverErr != nil || r.clientErr != nil {
		t.Fatalf("server that asks no certificate: server %v, client %v", r.serverErr, r.clientErr)
	}
	if len(r.server.PeerCertificates) != 0 {
		t.Error("a server that asks no certificate got one")
	}
}

func TestPinnedTLS_AcceptsOnlyThePinnedCA(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	member := newTestIdentity(t, ca)
	strangerCert, strangerKey := issue(t, other, newNodeID(t), time.Hour, time.Now())
	serve := member.ServerTLS(never, tls.VerifyClientCertIfGiven)

	tests := []struct {
		name    string
		server  *tls.Config
		pin     string
		refused func(error) bool // nil: accepted
	}{
		{"right pin", serve, Fingerprint(ca.Cert), nil},
		{"another CA's pin", serve, Fingerprint(other.Cert), is(ErrPinMismatch)},
		{"malformed pin", serve, "sha256:1234", is(ErrBadFingerprint)},
		{"pin without its prefix", serve, Fingerprint(ca.Cert)[len("sha256:"):], is(ErrBadFingerprint)},
		// An impostor can send the real CA certificate, which is public,
		// after its own; its leaf must still be signed by that CA.
		{"impostor sending the pinned CA", rawTLS(t, append(append([]byte{}, strangerCert...), ca.CertPEM...), strangerKey), Fingerprint(ca.Cert), unknownCA},
		{"server sending no CA", rawTLS(t, strangerCert, strangerKey), Fingerprint(other.Cert), is(ErrPinMismatch)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := handshake(t, tt.server, PinnedTLS(tt.pin))
			if tt.refused != nil {
				if !tt.refused(r.clientErr) {
					t.Errorf("client error %v, want a refusal of this server", r.clientErr)
				}
				return
			}
			if r.clientErr != nil || r.serverErr != nil {
				t.Fatalf("handshake: server %v, client %v", r.serverErr, r.clientErr)
			}
			if id, err := PeerNodeID(&r.client); err != nil || id != member.NodeID() {
				t.Errorf("PeerNodeID = %q, %v; want %s", id, err, member.NodeID())
			}
			if len(r.server.PeerCertificates) != 0 {
				t.Error("a joining node presented a certificate")
			}
		})
	}
}

func TestIdentity_RenewSwapsThePresentedCertificate(t *testing.T) {
	ca := newTestCA(t)
	nodeID := newNodeID(t)
	certPEM, keyPEM := issue(t, ca, nodeID, time.Hour, time.Now())
	server, err := NewIdentity(certPEM, keyPEM, ca.CertPEM)
	if err != nil {
		t.Fatalf("NewIdentity: %v", err)
	}
	client := newTestIdentity(t, ca)
	serve, dial := server.ServerTLS(never, tls.RequireAndVerifyClientCert), client.ClientTLS(never)

	r := handshake(t, serve, dial)
	if r.clientErr != nil {
		t.Fatalf("first handshake: %v", r.clientErr)
	}
	before := r.client.PeerCertificates[0].SerialNumber

	newCert, newKey := issue(t, ca, nodeID, 2*time.Hour, time.Now())
	if err := server.Check(newCert, newKey); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got := server.Leaf().SerialNumber; got.Cmp(before) != 0 {
		t.Errorf("Check changed the presented certificate")
	}
	if err := server.Renew(newCert, newKey); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	want := mustParseCert(t, newCert).SerialNumber
	if got := server.Leaf().SerialNumber; got.Cmp(want) != 0 {
		t.Errorf("Leaf serial %v after Renew, want %v", got, want)
	}
	r = handshake(t, serve, dial)
	if r.clientErr != nil {
		t.Fatalf("second handshake: %v", r.clientErr)
	}
	if got := r.client.PeerCertificates[0].SerialNumber; got.Cmp(want) != 0 || got.Cmp(before) == 0 {
		t.Errorf("second handshake saw serial %v, want the renewed %v (was %v)", got, want, before)
	}
	if server.NodeID() != nodeID {
		t.Errorf("NodeID %s after Renew, want %s", server.NodeID(), nodeID)
	}
}

func TestIdentity_RenewRefuses(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	nodeID := newNodeID(t)
	certPEM, keyPEM := issue(t, ca, nodeID, time.Hour, time.Now())
	id, err := NewIdentity(certPEM, keyPEM, ca.CertPEM)
	if err != nil {
		t.Fatalf("NewIdentity: %v", err)
	}
	otherNodeCert, otherNodeKey := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	otherCACert, otherCAKey := issue(t, other, nodeID, time.Hour, time.Now())
	renewedCert, _ := issue(t, ca, nodeID, time.Hour, time.Now())

	tests := []struct {
		name      string
		cert, key []byte
		refused   func(error) bool
	}{
		{"another node's certificate", otherNodeCert, otherNodeKey, is(ErrOtherNode)},
		{"a certificate of another CA", otherCACert, otherCAKey, unknownCA},
		{"no key", renewedCert, nil, is(ErrBadKey)},
		{"the old key with a new key's certificate", renewedCert, keyPEM, is(ErrKeyMismatch)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := id.Check(tt.cert, tt.key); !tt.refused(err) {
				t.Errorf("Check error %v, want a refusal", err)
			}
			if err := id.Renew(tt.cert, tt.key); !tt.refused(err) {
				t.Errorf("Renew error %v, want a refusal", err)
			}
			if got := id.Leaf().SerialNumber; got.Cmp(mustParseCert(t, certPEM).SerialNumber) != 0 {
				t.Error("a refused Renew changed the presented certificate")
			}
		})
	}
}

func TestNewIdentity_Refuses(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	certPEM, keyPEM := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	_, otherKey, _ := NewKey()
	chainPEM, notNodeKey := signNotANode(t, ca)
	tests := []struct {
		name              string
		cert, key, bundle []byte
		want              error
	}{
		{"key of another node", certPEM, otherKey, ca.CertPEM, ErrKeyMismatch},
		{"node certificate as bundle", certPEM, keyPEM, certPEM, ErrNotCA},
		{"empty bundle", certPEM, keyPEM, nil, ErrNoCertificate},
		{"certificate that names no node", chainPEM, notNodeKey, ca.CertPEM, ErrNotNodeCert},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewIdentity(tt.cert, tt.key, tt.bundle); !errors.Is(err, tt.want) {
				t.Errorf("NewIdentity error %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := NewIdentity(certPEM, keyPEM, other.CertPEM); !unknownCA(err) {
		t.Errorf("NewIdentity against another CA: error %v, want an unknown authority", err)
	}
}

func TestPeerNodeID_RefusesUnverifiedPeers(t *testing.T) {
	ca := newTestCA(t)
	certPEM, _ := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	leaf := mustParseCert(t, certPEM) // a node certificate no handshake verified
	tests := map[string]*tls.ConnectionState{
		"no state":         nil,
		"no certificate":   {},
		"unverified chain": {PeerCertificates: []*x509.Certificate{leaf, ca.Cert}},
	}
	for name, cs := range tests {
		t.Run(name, func(t *testing.T) {
			if id, err := PeerNodeID(cs); !errors.Is(err, ErrNoPeerCert) {
				t.Errorf("PeerNodeID = %q, %v; want %v", id, err, ErrNoPeerCert)
			}
		})
	}
}
