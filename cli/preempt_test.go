package cli

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestSubmit_PreemptibleFlagsAndTheirLimits(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		code      int
		stderr    string
		wantGrace time.Duration
	}{
		{"preemptible with its own grace", []string{"--preemptible", "--preempt-grace", "2m"}, exitOK, "", 2 * time.Minute},
		{"preemptible gets the default grace", []string{"--preemptible"}, exitOK, "", 30 * time.Second},
		{"grace without preemptible", []string{"--preempt-grace", "1m"}, exitError, "Error: --preempt-grace: set, but the job is not preemptible", 0},
		{"grace over the limit", []string{"--preemptible", "--preempt-grace", "11m"}, exitError, "Error: --preempt-grace: 11m0s is out of range 0s..10m0s", 0},
		{"grace that does not parse", []string{"--preemptible", "--preempt-grace", "soon"}, exitUsage, `Error: --preempt-grace: invalid duration "soon"`, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			acceptSubmit(f)
			r := runCLI(t, append(append([]string{"--addr", f.URL, "submit"}, tc.args...), "true")...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("got code %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			if tc.code != exitOK {
				if n := len(f.requests()); n != 0 {
					t.Errorf("agent got %d requests, want none", n)
				}
				return
			}
			spec := submitted(t, f)[0].Spec
			if !spec.Preemptible || spec.PreemptGrace != structs.Duration(tc.wantGrace) {
				t.Fatalf("spec preemptible %v grace %s, want true %s", spec.Preemptible, spec.PreemptGrace, tc.wantGrace)
			}
		})
	}
}

func TestSubmit_FileSaysPreemptible(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	path := filepath.Join(t.TempDir(), "job.yaml")
	writeTestFile(t, path, "command: [train]\npreemptible: true\npreempt_grace: 45s\n")
	r := runCLI(t, "--addr", f.URL, "submit", "--file", path)
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if spec := submitted(t, f)[0].Spec; !spec.Preemptible || spec.PreemptGrace != structs.Duration(45*time.Second) {
		t.Fatalf("spec preemptible %v grace %s, want true 45s", spec.Preemptible, spec.PreemptGrace)
	}

	writeTestFile(t, path, "command: [train]\npreemptible: true\npreempt_grace: later\n")
	r = runCLI(t, "--addr", "http://127.0.0.1:1", "submit", "--file", path)
	if r.code != exitError || !strings.Contains(r.stderr, "preempt_grace: invalid duration") {
		t.Fatalf("exit %d, stderr %q; want 1 and the preempt_grace field named", r.code, r.stderr)
	}
}

func TestJob_HumanViewShowsPreemptions(t *testing.T) {
	d := api.JobDetail{Job: structs.Job{
		ID: testJobID, State: structs.JobQueued, Reason: "preempted by job 1234abcd (priority 10)",
		Preemptions: 2, PreemptReason: "preempted by job 1234abcd (priority 10)", Attempts: 2,
		Spec: structs.JobSpec{Command: []string{"train"}, Nodes: 1, Preemptible: true,
			PreemptGrace: structs.Duration(time.Minute)},
	}}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs/{id}", http.StatusOK, d)
	r := runCLI(t, "--addr", f.URL, "job", "abcdef01")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		`Waiting:\s+preempted by job 1234abcd \(priority 10\)`,
		`Preemptions:\s+2, last preempted by job 1234abcd \(priority 10\)`,
		`Preemptible:\s+yes, 1m0s between SIGTERM and SIGKILL`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("output does not match %q:\n%s", want, r.stdout)
		}
	}
}
