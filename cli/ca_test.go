package cli

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
)

func caReply(ca *testutil.CA) api.CA {
	return api.CA{CACerts: []string{string(ca.PEM)}, Fingerprint: api.Fingerprint(ca.Cert)}
}

func TestCAExport_UnverifiedPrintsFingerprintAndSendsNoToken(t *testing.T) {
	ca := newTestCA(t)
	cases := []struct {
		name  string
		agent func(t *testing.T) *fakeAgent
	}{
		{"https", func(t *testing.T) *fakeAgent { return newTLSFakeAgent(t, ca) }},
		{"http", newFakeAgent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.agent(t)
			f.reply("GET /v1/ca", http.StatusOK, caReply(ca))
			r := runCLI(t, "--addr", f.URL, "--token", "t0k", "ca", "export")
			if r.code != exitOK || r.stdout != string(ca.PEM) {
				t.Fatalf("got code %d, stdout %q, stderr %q; want the CA's PEM", r.code, r.stdout, r.stderr)
			}
			want := "fingerprint " + api.Fingerprint(ca.Cert) + "; not verified: compare it with the one the first node logged at start\n"
			if r.stderr != want {
				t.Errorf("stderr = %q, want %q", r.stderr, want)
			}
			if reqs := f.requests(); len(reqs) != 1 || reqs[0].Token != "" {
				t.Errorf("requests = %+v, want one without the token", reqs)
			}
		})
	}
}

func TestCAExport_WithCACertVerifiesAndWritesOut(t *testing.T) {
	ca := newTestCA(t)
	f := newTLSFakeAgent(t, ca)
	f.reply("GET /v1/ca", http.StatusOK, caReply(ca))
	out := filepath.Join(t.TempDir(), "cluster-ca.pem")
	r := runCLI(t, "--addr", f.URL, "--token", "t0k", "--ca-cert", caFile(t, ca), "ca", "export", "--out", out)
	if r.code != exitOK || r.stdout != "" || r.stderr != "fingerprint "+api.Fingerprint(ca.Cert)+"; verified with --ca-cert\n" {
		t.Fatalf("got code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != string(ca.PEM) {
		t.Fatalf("--out file: %q, %v; want the CA's PEM", b, err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("--out mode: %v, %v; want 0644 (umask permitting)", st.Mode(), err)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].Token != "t0k" {
		t.Errorf("requests = %+v, want one with the token, sent over a verified connection", reqs)
	}
}

func TestCAExport_InconsistentAnswersAreRefused(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	cases := []struct {
		name   string
		answer api.CA
		stderr string
	}{
		{"fingerprint of another certificate", api.CA{CACerts: []string{string(ca.PEM)}, Fingerprint: api.Fingerprint(other.Cert)}, "refusing the bundle"},
		{"bundle that does not sign the agent", caReply(other), "the agent's certificate is not signed by the CA bundle it sent"},
		{"no certificate", api.CA{Fingerprint: "sha256:00"}, "the agent's CA bundle: no PEM certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newTLSFakeAgent(t, ca)
			f.reply("GET /v1/ca", http.StatusOK, tc.answer)
			r := runCLI(t, "--addr", f.URL, "ca", "export")
			if r.code != exitError || r.stdout != "" || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stdout %q, stderr %q; want 1 and %q", r.code, r.stdout, r.stderr, tc.stderr)
			}
		})
	}
}

func TestCAExport_TokenRequiredSaysWhyNoneWasSent(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/ca", http.StatusUnauthorized, "missing token")
	r := runCLI(t, "--addr", f.URL, "ca", "export")
	if r.code != exitError || !strings.Contains(r.stderr, "without --ca-cert skein sends no API token") {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
}
