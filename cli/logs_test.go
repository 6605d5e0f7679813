package cli

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/skein-dev/skein/api"
)

func TestLogs_StreamsGoToMatchingWriters(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		rank   string
		follow bool
	}{
		{"defaults", []string{"abcdef01"}, "0", false},
		{"flags before ID", []string{"-f", "--rank", "1", "abcdef01"}, "1", true},
		{"flags after ID", []string{"abcdef01", "--follow", "--rank=2"}, "2", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.handle("GET /v1/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "%s of %s\n", r.URL.Query().Get("stream"), r.PathValue("id"))
			})
			r := runCLI(t, append([]string{"--addr", f.URL, "logs"}, tc.args...)...)
			if r.code != exitOK {
				t.Fatalf("exit code %d: %s", r.code, r.stderr)
			}
			if r.stdout != "stdout of abcdef01\n" || r.stderr != "stderr of abcdef01\n" {
				t.Errorf("stdout %q, stderr %q; want each stream on its own writer", r.stdout, r.stderr)
			}
			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("got %d requests, want one per stream", len(reqs))
			}
			streams := map[string]bool{}
			for _, req := range reqs {
				q := req.Query
				streams[q.Get("stream")] = true
				if q.Get("rank") != tc.rank || (q.Get("follow") == "true") != tc.follow {
					t.Errorf("query %v, want rank=%s follow=%v", q, tc.rank, tc.follow)
				}
			}
			if !streams[api.StreamStdout] || !streams[api.StreamStderr] {
				t.Errorf("streams asked for: %v, want stdout and stderr", streams)
			}
		})
	}
}

func TestLogs_AgentErrorIsReportedOnce(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/jobs/{id}/logs", http.StatusNotFound, `job "zz": not found`)
	r := runCLI(t, "--addr", f.URL, "logs", "zz")
	if r.code != exitError || r.stderr != "Error: job \"zz\": not found\n" {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
}

func TestLogs_NegativeRankIsError(t *testing.T) {
	f := newFakeAgent(t)
	r := runCLI(t, "--addr", f.URL, "logs", "--rank", "-1", "abc")
	if r.code != exitError || r.stderr != "Error: --rank -1: must not be negative\n" {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("agent got %d requests, want none", n)
	}
}
