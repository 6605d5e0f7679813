package cluster

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/skein-dev/skein/internal/testutil"
)

// tlsPair returns mutual TLS for node id: a certificate from ca naming id
// (DNS) and 127.0.0.1, good for both ends of a connection, and ca as the
// only authority it trusts.
func tlsPair(t *testing.T, ca *testutil.CA, id string) *TLSPair {
	t.Helper()
	cert := ca.NodeCert(t, id, net.IPv4(127, 0, 0, 1))
	return &TLSPair{
		Server: &tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    ca.Pool(),
			MinVersion:   tls.VersionTLS13,
		},
		Client: &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      ca.Pool(),
			MinVersion:   tls.VersionTLS13,
		},
	}
}
