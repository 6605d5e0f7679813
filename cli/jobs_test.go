package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestJobs_TableShowsOneRowPerJob(t *testing.T) {
	now := time.Now()
	long := []string{"python", "train.py", "--data", "/datasets/" + strings.Repeat("x", 60)}
	jobs := []structs.Job{
		{ID: "11111111aaaa", Spec: structs.JobSpec{Name: "wait", Command: []string{"sleep", "1"}, Nodes: 1, GPUs: 8},
			State: structs.JobQueued, Reason: "no node has 8 free GPUs", SubmittedAt: now.Add(-3*time.Minute - time.Second)},
		{ID: "22222222bbbb", Spec: structs.JobSpec{Command: long, Nodes: 2, GPUs: 4},
			State: structs.JobRunning, SubmittedAt: now.Add(-2*time.Hour - time.Second)},
		{ID: "33333333cccc", Spec: structs.JobSpec{Name: "bad", Command: []string{"false"}, Nodes: 1},
			State: structs.JobFailed, Reason: "exit code 1", SubmittedAt: now.Add(-4*24*time.Hour - time.Second)},
	}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, jobs)

	r := runCLI(t, "--addr", f.URL, "jobs")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want header and 3 rows:\n%s", len(lines), r.stdout)
	}
	want := [][]string{
		{"ID", "NAME", "STATE", "GPUS", "AGE", "INFO"},
		{"11111111", "wait", "queued", "8", "3m", "no node has 8 free GPUs"},
		{"22222222", "-", "running", "2x4", "2h", "python train.py --data /datasets/xxxxxxxxxxxxxx..."},
		{"33333333", "bad", "failed", "0", "4d", "exit code 1"},
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, "|") != strings.Join(strings.Fields(strings.Join(w, " ")), "|") {
			t.Errorf("line %d = %q, want columns %q", i, lines[i], w)
		}
	}
	if info := lines[2][strings.Index(lines[0], "INFO"):]; len(info) != infoWidth {
		t.Errorf("INFO %q is %d characters, want it cut to %d", info, len(info), infoWidth)
	}
	if q := f.requests()[0].Query; q.Has("all") {
		t.Errorf("query = %v, want no all without --all", q)
	}
}

func TestJobs_AllFlagAsksForEveryJob(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, []structs.Job{})
	if r := runCLI(t, "--addr", f.URL, "jobs", "--all"); r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	if q := f.requests()[0].Query; q.Get("all") != "true" {
		t.Errorf("query = %v, want all=true", q)
	}
}

func TestJobs_EmptyList(t *testing.T) {
	cases := []struct {
		name  string
		args  []string
		reply any
		want  string
	}{
		{"human", nil, []structs.Job{}, "No jobs.\n"},
		{"json", []string{"--json"}, []structs.Job{}, "[]\n"},
		{"json from null", []string{"--json"}, nil, "[]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("GET /v1/jobs", http.StatusOK, tc.reply)
			r := runCLI(t, append([]string{"--addr", f.URL, "jobs"}, tc.args...)...)
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q; want 0, %q", r.code, r.stdout, tc.want)
			}
		})
	}
}

func TestJobs_JSONParsesBack(t *testing.T) {
	jobs := []structs.Job{{ID: testJobID, Spec: structs.JobSpec{Command: []string{"true"}, Nodes: 1}, State: structs.JobSucceeded}}
	f := newFakeAgent(t)
	f.reply("GET /v1/jobs", http.StatusOK, jobs)
	r := runCLI(t, "--addr", f.URL, "jobs", "--json")
	if r.code != exitOK {
		t.Fatalf("exit code %d: %s", r.code, r.stderr)
	}
	var got []structs.Job
	mustDecode(t, r.stdout, &got)
	if len(got) != 1 || got[0].ID != testJobID || got[0].State != structs.JobSucceeded {
		t.Errorf("jobs = %+v, want the agent's list", got)
	}
}
