package agent

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// fromAddr is an HTTP client whose connections come from the loopback
// address from (the machine's 127/8 is all loopback), as a client behind
// another address would; conf is the cluster's TLS (nil: plain HTTP).
func fromAddr(from string, a *Agent) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	if a.secure != nil {
		tr.TLSClientConfig = a.secure.ClientTLS().Clone()
		tr.TLSClientConfig.Certificates = nil
		tr.TLSClientConfig.GetClientCertificate = nil
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// statusWith sends GET url with token in X-Skein-Token from hc and returns
// the status.
func statusWith(t *testing.T, hc *http.Client, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.TokenHeader, token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Eleven bad tokens from an address (a NAT, a login node, a notebook
// server) lock nobody else out of the API or the ingress from it, and the
// ingress limits them as the API does.
func TestRateLimit_OthersBadTokensLockNoValidTokenOut_APIAndIngress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, admin := startAgent(t, cfg)
	colleague := userToken(t, admin, "carl", structs.RoleReader)
	for _, door := range []struct{ name, url, from string }{
		{"the API", a.HTTPAddr() + "/v1/status", "127.0.0.2"},
		{"the ingress", a.IngressAddr() + "/llama/v1/models", "127.0.0.3"},
	} {
		hc := fromAddr(door.from, a)
		for i := range 11 {
			bad := fmt.Sprintf("SKA1.%016x.%043d", i, i)
			if code := statusWith(t, hc, door.url, bad); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
				t.Fatalf("%s, bad token %d: %d, want 401 or 429", door.name, i, code)
			}
		}
		if code := statusWith(t, hc, door.url, "SKA1.ffffffffffffffff.0000000000000000000000000000000000000000000"); code != http.StatusTooManyRequests {
			t.Errorf("%s, a 12th bad token from the same address: %d, want 429", door.name, code)
		}
		if code := statusWith(t, hc, door.url, "a-guess-at-the-cluster-token"); code != http.StatusTooManyRequests {
			t.Errorf("%s, a guess at a short token from the same address: %d, want 429", door.name, code)
		}
		want := http.StatusOK
		if door.name == "the ingress" {
			want = http.StatusNotFound // admitted: the service does not exist
		}
		if code := statusWith(t, hc, door.url, colleague); code != want {
			t.Errorf("%s, a colleague's valid token from the same address: %d, want %d", door.name, code, want)
		}
	}
}
