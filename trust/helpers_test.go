package trust

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"testing"
	"time"
)

// newTestCA returns a CA valid now.
func newTestCA(t *testing.T) *CA {
	t.Helper()
	ca, err := NewCA(time.Now())
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

// newNodeID returns a random node ID, as structs.NewID makes them.
func newNodeID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// issue makes a key and has ca sign a certificate for nodeID, valid from
// now for ttl.
func issue(t *testing.T, ca *CA, nodeID string, ttl time.Duration, now time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, keyPEM, err := NewKey()
	if err != nil {
		t.Fatalf("NewKey: %v", err)
	}
	csr, err := NewCSR(key, nodeID, []net.IP{net.ParseIP("10.0.0.7")})
	if err != nil {
		t.Fatalf("NewCSR: %v", err)
	}
	certPEM, err = ca.SignNode(csr, nodeID, ttl, now)
	if err != nil {
		t.Fatalf("SignNode: %v", err)
	}
	return certPEM, keyPEM
}

// newTestIdentity returns the identity of a new node of ca.
func newTestIdentity(t *testing.T, ca *CA) *Identity {
	t.Helper()
	certPEM, keyPEM := issue(t, ca, newNodeID(t), time.Hour, time.Now())
	id, err := NewIdentity(certPEM, keyPEM, ca.CertPEM)
	if err != nil {
		t.Fatalf("NewIdentity: %v", err)
	}
	return id
}

// mustParseCert returns the first certificate of a PEM bundle.
func mustParseCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := ParseCerts(certPEM)
	if err != nil {
		t.Fatalf("ParseCerts: %v", err)
	}
	return certs[0]
}

// rawTLS returns a configuration that presents certPEM (a chain, PEM) and
// keyPEM, and verifies nothing: a peer this package does not make.
func rawTLS(t *testing.T, certPEM, keyPEM []byte) *tls.Config {
	t.Helper()
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("X509KeyPair: %v", err)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true,
		ClientAuth:         tls.RequestClientCert,
	}
}

// handshakeResult is what each end of a handshake saw. An end's error is
// its handshake's, or, if that succeeded, the error of a first one-byte
// exchange, which is where a TLS 1.3 client learns that the server
// refused its certificate.
type handshakeResult struct {
	server, client       tls.ConnectionState
	serverErr, clientErr error
}

// handshake connects a client and a server over loopback TCP.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) handshakeResult {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	deadline := time.Now().Add(10 * time.Second)

	type end struct {
		cs  tls.ConnectionState
		err error
	}
	served := make(chan end, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- end{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(deadline)
		tc := tls.Server(c, serverCfg)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte{1})
		}
		served <- end{cs: tc.ConnectionState(), err: err}
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	tc := tls.Client(c, clientCfg)
	var r handshakeResult
	r.clientErr = tc.Handshake()
	if r.clientErr == nil {
		_, r.clientErr = io.ReadFull(tc, make([]byte, 1))
	}
	r.client = tc.ConnectionState()
	c.Close()
	s := <-served
	r.server, r.serverErr = s.cs, s.err
	return r
}
