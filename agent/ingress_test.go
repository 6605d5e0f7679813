package agent

import (
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
)

// ingressGet sends GET path to the agent's ingress with the token (""
// none) and returns the status and body.
func ingressGet(t *testing.T, hc *http.Client, a *Agent, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.IngressAddr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestIngress_RunsOnlyWhenGivenAPort(t *testing.T) {
	a, _ := startAgent(t, testConfig(t, t.TempDir()))
	if addr := a.IngressAddr(); addr != "" {
		t.Errorf("an agent given no ingress port serves one at %s", addr)
	}
}

func TestIngress_ALoopbackAgentWithoutATokenServesPlainHTTP(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, _ := startAgent(t, cfg)
	if !strings.HasPrefix(a.IngressAddr(), "http://127.0.0.1:") {
		t.Fatalf("ingress at %q, want plain HTTP on the bind address", a.IngressAddr())
	}
	code, body := ingressGet(t, http.DefaultClient, a, "/llama/v1/models", "")
	if code != http.StatusNotFound || body != "service \"llama\" not found\n" {
		t.Errorf("got %d %q, want 404 naming the service", code, body)
	}
}

func TestIngress_ASecureAgentServesHTTPSAndWantsTheAPIsToken(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Security = SecurityTLS
	cfg.IngressPort = -1
	a, _ := startAgent(t, cfg)
	if !strings.HasPrefix(a.IngressAddr(), "https://") {
		t.Fatalf("ingress at %q, want HTTPS", a.IngressAddr())
	}
	tok, err := os.ReadFile(filepath.Join(a.DataDir(), "api-token"))
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := os.ReadFile(a.secure.CACertPath())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := api.ClusterTLS(bundle)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}, Timeout: time.Minute}
	testutil.WaitFor(t, 10*time.Second, func() error {
		_, err := hc.Get(a.IngressAddr() + "/")
		return err
	})
	if code, body := ingressGet(t, hc, a, "/llama/", ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %q, want 401", code, body)
	}
	if code, body := ingressGet(t, hc, a, "/llama/", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("with a wrong token: %d %q, want 401", code, body)
	}
	if code, body := ingressGet(t, hc, a, "/llama/", strings.TrimSpace(string(tok))); code != http.StatusNotFound {
		t.Errorf("with the cluster's token: %d %q, want 404 for a service that does not exist", code, body)
	}
	// Without the cluster's CA the certificate is not trusted.
	untrusted := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}, Timeout: time.Minute}
	if _, err := untrusted.Get(a.IngressAddr() + "/"); err == nil {
		t.Error("a client without the cluster's CA trusted the ingress")
	}
}
