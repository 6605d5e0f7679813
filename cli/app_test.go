package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/skein-dev/skein/agent"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestRun_ExitCodes(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/jobs/{id}", http.StatusNotFound, `job "abc": not found`)
	f.fail("POST /v1/jobs", http.StatusBadRequest, "spec: gpus: 65 is out of range 0..64")
	f.fail("GET /v1/status", http.StatusServiceUnavailable, "no leader: an election is running")
	f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})

	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string // a part of stderr
	}{
		{"version", []string{"version"}, exitOK, ""},
		{"no command", []string{}, exitUsage, "USAGE:"},
		{"help flag alone", []string{"--help"}, exitOK, ""},
		{"help flag", []string{"jobs", "--help"}, exitOK, ""},
		{"help flag after argument", []string{"job", "abc", "--help"}, exitOK, ""},
		{"list ok", []string{"jobs"}, exitOK, ""},
		{"unknown job", []string{"job", "abc"}, exitError, `Error: job "abc": not found`},
		{"bad request", []string{"submit", "true"}, exitError, "Error: spec: gpus: 65 is out of range 0..64"},
		{"unavailable", []string{"status"}, exitError, "Error: no leader: an election is running"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `Error: unknown command "frobnicate"`},
		{"unknown flag", []string{"jobs", "--bogus"}, exitUsage, "Error: flag provided but not defined: -bogus"},
		{"unknown flag after argument", []string{"job", "abc", "--bogus"}, exitUsage, "flag provided but not defined: --bogus"},
		{"unknown global flag", []string{"--bogus", "jobs"}, exitUsage, "flag provided but not defined"},
		{"missing ID for job", []string{"job"}, exitUsage, "Error: missing ID"},
		{"missing ID for cancel", []string{"cancel"}, exitUsage, "Error: missing ID"},
		{"missing ID for logs", []string{"logs", "-f"}, exitUsage, "Error: missing ID"},
		{"extra argument", []string{"cancel", "abc", "def"}, exitUsage, `Error: unexpected argument "def"`},
		{"argument to a command without any", []string{"nodes", "abc"}, exitUsage, `unexpected argument "abc"`},
		{"flag value that does not parse", []string{"logs", "--rank", "one", "abc"}, exitUsage, `invalid value "one"`},
		{"flag after argument without value", []string{"logs", "abc", "--rank"}, exitUsage, "flag needs an argument: --rank"},
		{"help for unknown topic", []string{"help", "frobnicate"}, exitUsage, "No help topic"},
		{"bad address", []string{"--addr", "ftp://x", "jobs"}, exitUsage, "--addr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--addr", f.URL}, tc.args...)
			if tc.name == "bad address" {
				args = tc.args
			}
			r := runCLI(t, args...)
			if r.code != tc.code {
				t.Fatalf("exit code = %d, want %d\nstdout: %s\nstderr: %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("stderr = %q, want it to contain %q", r.stderr, tc.stderr)
			}
		})
	}
}

func TestRun_UsageErrorNamesCommandHelp(t *testing.T) {
	r := runCLI(t, "cancel")
	want := "Error: missing ID\nRun 'skein cancel --help' for usage.\n"
	if r.code != exitUsage || r.stderr != want {
		t.Fatalf("got code %d, stderr %q; want %d, %q", r.code, r.stderr, exitUsage, want)
	}
}

func TestRun_GlobalFlagsComeFromEnvironment(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
	t.Setenv("SKEIN_ADDR", f.URL)
	t.Setenv("SKEIN_TOKEN", "s3cret")

	if r := runCLI(t, "jobs"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Token != "s3cret" {
		t.Fatalf("requests = %+v, want one carrying the token from SKEIN_TOKEN", reqs)
	}
}

func TestRun_TokenFlagIsSent(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
	if r := runCLI(t, "--addr", f.URL, "--token", "t0k", "jobs"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if reqs := f.requests(); len(reqs) != 1 || reqs[0].Token != "t0k" {
		t.Fatalf("requests = %+v, want one carrying the token", reqs)
	}
}

func TestRun_AgentUnreachableIsError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()

	r := runCLI(t, "--addr", addr, "jobs")
	if r.code != exitError || !strings.Contains(r.stderr, "cannot reach a skein agent") {
		t.Fatalf("got code %d, stderr %q; want 1 and a reachability error", r.code, r.stderr)
	}
}

func TestVersion_PrintsVersionAndPlatform(t *testing.T) {
	r := runCLI(t, "version")
	want := fmt.Sprintf("skein %s (api %d, log %d, snapshot %d)\n%s %s/%s\n", structs.Version, structs.APIVersion, structs.LogVersion(),
		agent.SnapshotVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if r.code != exitOK || !strings.HasPrefix(r.stdout, want) {
		t.Fatalf("got code %d, stdout %q; want 0, %q", r.code, r.stdout, want)
	}
}

func TestRun_DefaultAddressIsLocalAgent(t *testing.T) {
	app := NewApp(nil, nil)
	for _, fl := range app.Flags {
		if fl.Names()[0] == "addr" {
			if got := fl.String(); !strings.Contains(got, api.DefaultAddr) || !strings.Contains(got, "SKEIN_ADDR") {
				t.Fatalf("--addr flag = %q, want default %s from SKEIN_ADDR", got, api.DefaultAddr)
			}
			return
		}
	}
	t.Fatal("no --addr flag")
}

// An agent's answer that names a request field (one only the cluster can
// judge: no node could ever give it) gets the flag that sets it.
func TestRun_AnAgentsFieldGetsItsFlag(t *testing.T) {
	for _, tc := range []struct {
		name, field, want string
	}{
		{"a job field", "gpus", "(set with --gpus)"},
		{"a service's job field", "job.memory_mib", "(set with --mem)"},
		{"mounts the nodes allow", "mounts", "(a job asks with --mount; a node allows directories with skein agent --allow-mount)"},
		{"a field without a flag", "spec", ""},
		{"no field", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("POST /v1/jobs", http.StatusBadRequest, api.ErrorBody{Error: "no node could ever give it", Field: tc.field})
			r := runCLI(t, "--addr", f.URL, "submit", "true")
			want := "Error: no node could ever give it\n" + tc.want
			if tc.want != "" {
				want += "\n"
			}
			if r.code != exitError || r.stderr != want {
				t.Fatalf("exit %d, stderr %q; want %d, %q", r.code, r.stderr, exitError, want)
			}
		})
	}
}
