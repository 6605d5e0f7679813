package cli

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestRun_TokenFileIsReadAndTrimmed(t *testing.T) {
	cases := []struct {
		name string
		env  bool
	}{
		{"flag", false},
		{"environment", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
			file := tempFile(t, "token", "  s3cret\n\n")
			args := []string{"--addr", f.URL, "--token-file", file, "jobs"}
			if tc.env {
				t.Setenv("SKEIN_TOKEN_FILE", file)
				args = []string{"--addr", f.URL, "jobs"}
			}
			if r := runCLI(t, args...); r.code != exitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			if reqs := f.requests(); len(reqs) != 1 || reqs[0].Token != "s3cret" {
				t.Fatalf("requests = %+v, want one carrying the token from the file, trimmed", reqs)
			}
		})
	}
}

func TestRun_TokenAndTokenFileIsUsageError(t *testing.T) {
	f := newFakeAgent(t)
	file := tempFile(t, "token", "s3cret")
	cases := map[string]func(t *testing.T) []string{
		"flags": func(*testing.T) []string {
			return []string{"--token", "t", "--token-file", file, "jobs"}
		},
		"token from environment": func(t *testing.T) []string {
			t.Setenv("SKEIN_TOKEN", "t")
			return []string{"--token-file", file, "jobs"}
		},
	}
	t.Run("empty token in environment is no token", func(t *testing.T) {
		f := newFakeAgent(t)
		f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
		t.Setenv("SKEIN_TOKEN", "")
		if r := runCLI(t, "--addr", f.URL, "--token-file", file, "jobs"); r.code != exitOK || f.requests()[0].Token != "s3cret" {
			t.Fatalf("got code %d, stderr %q, requests %+v; want the token from the file", r.code, r.stderr, f.requests())
		}
	})
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			r := runCLI(t, append([]string{"--addr", f.URL}, args(t)...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, "--token (or SKEIN_TOKEN) and --token-file (or SKEIN_TOKEN_FILE) are both set") {
				t.Fatalf("got code %d, stderr %q; want a usage error naming both", r.code, r.stderr)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("the agent got %d requests, want none", n)
	}
}

func TestRun_UnreadableSecretFilesNameTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	empty := tempFile(t, "empty", " \n")
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"missing token file", []string{"--token-file", missing, "jobs"}, "Error: --token-file: open " + missing},
		{"empty token file", []string{"--token-file", empty, "jobs"}, "Error: --token-file: " + empty + " is empty"},
		{"missing CA file", []string{"--ca-cert", missing, "jobs"}, "Error: --ca-cert: open " + missing},
		{"CA file without a certificate", []string{"--ca-cert", empty, "jobs"}, "Error: --ca-cert " + empty + ": no PEM certificate in it"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append([]string{"--addr", "http://127.0.0.1:1"}, tc.args...)...)
			if r.code != exitError || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.stderr)
			}
		})
	}
}

func TestRun_CACertVerifiesClusterAgentDialledByIP(t *testing.T) {
	ca := newTestCA(t)
	f := newTLSFakeAgent(t, ca)
	f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
	cases := []struct {
		name string
		env  bool
	}{
		{"flag", false},
		{"environment", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--addr", f.URL, "--token", "t0k", "--ca-cert", caFile(t, ca), "jobs"}
			if tc.env {
				t.Setenv("SKEIN_CACERT", caFile(t, ca))
				args = []string{"--addr", f.URL, "--token", "t0k", "jobs"}
			}
			if r := runCLI(t, args...); r.code != exitOK || r.stdout != "No jobs.\n" {
				t.Fatalf("got code %d, stdout %q, stderr %q; want the job list over TLS", r.code, r.stdout, r.stderr)
			}
		})
	}
	for _, req := range f.requests() {
		if req.Token != "t0k" {
			t.Errorf("request %s %s carried token %q, want t0k", req.Method, req.Path, req.Token)
		}
	}
}

func TestRun_HTTPSAgentOfAnotherCAIsRefused(t *testing.T) {
	f := newTLSFakeAgent(t, newTestCA(t))
	f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"system roots", nil, "set SKEIN_CACERT or --ca-cert to the file `skein ca export` writes"},
		{"another cluster's CA", []string{"--ca-cert", caFile(t, newTestCA(t))}, "not signed by the CA bundle given (--ca-cert or SKEIN_CACERT)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, append(append([]string{"--addr", f.URL, "--token", "t0k"}, tc.args...), "jobs")...)
			if r.code != exitError || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.stderr)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("the agent got %d requests (and the token), want none", n)
	}
}
