package cli

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/skein-dev/skein/internal/testutil"
)

// newTestCA makes a throwaway cluster CA.
func newTestCA(t *testing.T) *testutil.CA {
	t.Helper()
	return testutil.NewCA(t, "skein test CA")
}

// caFile writes ca's PEM to a file and returns its path.
func caFile(t *testing.T, ca *testutil.CA) string {
	t.Helper()
	return tempFile(t, "ca.pem", string(ca.PEM))
}

// newTLSFakeAgent is newFakeAgent over https, with a certificate ca signed
// for a node ID, as a secure cluster's nodes have: the test dials it by IP,
// so its name never matches.
func newTLSFakeAgent(t *testing.T, ca *testutil.CA) *fakeAgent {
	t.Helper()
	f := &fakeAgent{mux: http.NewServeMux()}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.NodeCert(t, "node-5f3a")}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// tempFile writes content to a file named name in a fresh temporary
// directory and returns its path.
func tempFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	writeTestFile(t, p, content)
	return p
}
