package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// tlsAgent serves the status endpoint over TLS with a certificate ca signed
// for a node ID; the test dials it by IP, so the name never matches.
func tlsAgent(t *testing.T, ca *testutil.CA) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"node":"a","leader":"a"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.NodeCert(t, "node-5f3a")}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestClusterTLS_AcceptsClusterCertDialledByIP(t *testing.T) {
	ca := testutil.NewCA(t, "skein test CA")
	srv := tlsAgent(t, ca)
	cfg, err := ClusterTLS(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS13 {
		t.Errorf("MinVersion = %x, want TLS 1.3", cfg.MinVersion)
	}
	c, err := NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.WithTLS(cfg).Status(context.Background())
	if err != nil || s.Node != "a" {
		t.Fatalf("status over TLS from %s with a certificate for node-5f3a: %+v, %v", srv.URL, s, err)
	}
}

func TestClusterTLS_OtherCAIsRefused(t *testing.T) {
	srv := tlsAgent(t, testutil.NewCA(t, "skein test CA"))
	cfg, err := ClusterTLS(testutil.NewCA(t, "skein test CA").PEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(srv.URL, "secret")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.WithTLS(cfg).Status(context.Background())
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "not signed by the CA bundle given (--ca-cert or SKEIN_CACERT)") {
		t.Fatalf("status from a server of another CA: %v; want an unknown-authority error naming the bundle", err)
	}
}

func TestClient_ClusterCAWithoutBundleSaysHowToGetOne(t *testing.T) {
	srv := tlsAgent(t, testutil.NewCA(t, "skein test CA"))
	c, err := NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "set SKEIN_CACERT or --ca-cert to the file `skein ca export` writes") {
		t.Fatalf("status from a cluster-CA server with the system roots: %v; want a hint to set SKEIN_CACERT", err)
	}
}

func TestClient_PlainHTTPToTLSAgentSaysUseHTTPS(t *testing.T) {
	srv := tlsAgent(t, testutil.NewCA(t, "skein test CA"))
	addr := strings.Replace(srv.URL, "https://", "http://", 1)
	c, err := NewClient(addr, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "serves https: use https://") {
		t.Fatalf("status over http from a TLS agent: %v; want a hint to use https", err)
	}
}

func TestClusterTLS_BundleWithoutCertificateIsRefused(t *testing.T) {
	for name, bundle := range map[string][]byte{
		"empty":    nil,
		"not PEM":  []byte("hello"),
		"key only": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}}),
	} {
		if _, err := ClusterTLS(bundle); !errors.Is(err, ErrNoCACert) {
			t.Errorf("%s: ClusterTLS = %v, want ErrNoCACert", name, err)
		}
	}
}

func TestFingerprint_IsSHA256OfDER(t *testing.T) {
	ca := testutil.NewCA(t, "skein test CA")
	fp := Fingerprint(ca.Cert)
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != len("sha256:")+64 {
		t.Fatalf("Fingerprint = %q, want sha256: and 64 hex digits", fp)
	}
	certs, err := ParseCerts(ca.PEM)
	if err != nil || len(certs) != 1 || Fingerprint(certs[0]) != fp {
		t.Fatalf("ParseCerts(PEM) = %v, %v; want the same certificate back", certs, err)
	}
}

// TestClient_TrustEndpoints checks each trust method's method, path, body
// and answer against a recording server.
func TestClient_TrustEndpoints(t *testing.T) {
	type call struct {
		method, path, body string
	}
	var got call
	answers := map[string]string{
		"GET /v1/ca":                  `{"ca_certs":["PEM"],"fingerprint":"sha256:ab"}`,
		"POST /v1/join-tokens":        `{"token":"skein-jt-x","info":{"id":"jt1","uses":0,"state":"active","expires_at":"2030-01-01T00:00:00Z","created_at":"2029-12-31T00:00:00Z"}}`,
		"GET /v1/join-tokens":         `[{"id":"jt1","uses":1,"max_uses":3,"state":"active","expires_at":"2030-01-01T00:00:00Z","created_at":"2029-12-31T00:00:00Z"}]`,
		"DELETE /v1/join-tokens/jt1":  `{"id":"jt1","uses":1,"state":"revoked","revoked":true,"expires_at":"2030-01-01T00:00:00Z","created_at":"2029-12-31T00:00:00Z"}`,
		"GET /v1/keyring":             `{"generation":2,"keys":1,"rotating":false,"nodes":{"a":2}}`,
		"POST /v1/keyring/rotate":     `{"generation":3,"keys":2,"rotating":true,"nodes":{"a":2}}`,
		"POST /v1/nodes/n%2F1/revoke": `{"node_id":"n/1","out_of_raft":true,"keyring_generation":6,"rotated":true,"refused":true,"done":true}`,
		"POST /v1/admit":              `{"cert":"C","ca_certs":["CA"],"keyring":{"primary":"k","generation":1},"gossip_addrs":["10.0.0.1:7472"]}`,
		"POST /v1/internal/renew":     `{"cert":"C2"}`,
		"POST /v1/internal/ca-key":    `{}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = call{r.Method, r.URL.EscapedPath(), strings.TrimSpace(string(b))}
		a, ok := answers[r.Method+" "+r.URL.EscapedPath()]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no route"}`))
			return
		}
		if a == "" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Write([]byte(a))
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(name string, err error, want call) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got != want {
			t.Errorf("%s sent %+v, want %+v", name, got, want)
		}
	}
	jsonOf := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	ca, err := c.CA(ctx)
	check("CA", err, call{"GET", "/v1/ca", ""})
	if ca == nil || ca.Fingerprint != "sha256:ab" || len(ca.CACerts) != 1 {
		t.Errorf("CA = %+v", ca)
	}
	req := JoinTokenCreateRequest{TTL: structs.Duration(time.Hour), Uses: 3, Description: "rack 4"}
	jt, err := c.CreateJoinToken(ctx, req)
	check("CreateJoinToken", err, call{"POST", "/v1/join-tokens", jsonOf(req)})
	if jt == nil || jt.Token != "skein-jt-x" || jt.Info.ID != "jt1" {
		t.Errorf("CreateJoinToken = %+v", jt)
	}
	ts, err := c.JoinTokens(ctx)
	check("JoinTokens", err, call{"GET", "/v1/join-tokens", ""})
	if len(ts) != 1 || ts[0].MaxUses != 3 {
		t.Errorf("JoinTokens = %+v", ts)
	}
	rt, err := c.RevokeJoinToken(ctx, "jt1")
	check("RevokeJoinToken", err, call{"DELETE", "/v1/join-tokens/jt1", ""})
	if rt == nil || !rt.Revoked || rt.State != "revoked" {
		t.Errorf("RevokeJoinToken = %+v", rt)
	}
	k, err := c.Keyring(ctx)
	check("Keyring", err, call{"GET", "/v1/keyring", ""})
	if k == nil || k.Generation != 2 || k.Nodes["a"] != 2 {
		t.Errorf("Keyring = %+v", k)
	}
	k, err = c.RotateKeyring(ctx)
	check("RotateKeyring", err, call{"POST", "/v1/keyring/rotate", "{}"})
	if k == nil || k.Generation != 3 || !k.Rotating {
		t.Errorf("RotateKeyring = %+v", k)
	}
	rev, err := c.RevokeNode(ctx, "n/1", NodeRevokeRequest{Reason: "stolen"})
	check("RevokeNode", err, call{"POST", "/v1/nodes/n%2F1/revoke", `{"reason":"stolen"}`})
	if rev == nil || !rev.Done || rev.KeyringGeneration != 6 {
		t.Errorf("RevokeNode = %+v", rev)
	}
	admit := AdmitRequest{Token: "skein-jt-x", NodeID: "n2", Name: "gpu-02", CSR: "CSR"}
	ar, err := c.Admit(ctx, admit)
	check("Admit", err, call{"POST", "/v1/admit", jsonOf(admit)})
	if ar == nil || ar.Cert != "C" || ar.Keyring.Primary != "k" || len(ar.GossipAddrs) != 1 {
		t.Errorf("Admit = %+v", ar)
	}
	rr, err := c.Renew(ctx, RenewRequest{CSR: "CSR2"})
	check("Renew", err, call{"POST", "/v1/internal/renew", `{"csr":"CSR2"}`})
	if rr == nil || rr.Cert != "C2" {
		t.Errorf("Renew = %+v", rr)
	}
	err = c.PushCAKey(ctx, CAKeyRequest{Key: "KEY"})
	check("PushCAKey", err, call{"POST", "/v1/internal/ca-key", `{"key":"KEY"}`})
}

func TestClient_TrustErrorsComeBackAsAPIErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"join token \"jt9\": not found"}`))
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RevokeJoinToken(context.Background(), "jt9"); !IsNotFound(err) || err.Error() != `join token "jt9": not found` {
		t.Fatalf("RevokeJoinToken of an unknown token: %v", err)
	}
	if _, err := c.RevokeNode(context.Background(), "n9", NodeRevokeRequest{}); !IsNotFound(err) {
		t.Fatalf("RevokeNode of an unknown node: %v", err)
	}
}

// TestClusterTLS_ServersChainIsTheCAsOwnOnly: a server certificate signed
// by an intermediate CA of the cluster CA's, sent with the intermediate,
// is refused (the cluster CA signs node certificates itself, and a client
// takes no CA from the server it checks), and a bundle holding a
// certificate that is no CA is refused, naming it.
func TestClusterTLS_ServersChainIsTheCAsOwnOnly(t *testing.T) {
	root := testutil.NewCA(t, "skein test CA")
	inter := root.Intermediate(t, "an intermediate")
	leaf := inter.NodeCert(t, "node-5f3a")
	leaf.Certificate = append(leaf.Certificate, inter.Cert.Raw)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"node":"a","leader":"a"}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{leaf}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg, err := ClusterTLS(root.PEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(srv.URL, "secret")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WithTLS(cfg).Status(context.Background()); err == nil {
		t.Fatal("a server chaining to the cluster CA through an intermediate it sent was accepted")
	}
	node := root.Issue(t, testutil.Leaf{CommonName: "node-5f3a"})
	if _, err := ClusterTLS(node.CertPEM); !errors.Is(err, ErrNotCA) || !strings.Contains(err.Error(), "node-5f3a") {
		t.Errorf("a bundle holding a node's certificate: %v, want ErrNotCA naming it", err)
	}
}
