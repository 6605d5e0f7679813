package cli

import (
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestGPUList_IndexesAsRangesAndUnknownGPUsByTheirUUIDsStart(t *testing.T) {
	index := map[string]int{"GPU-a": 0, "GPU-b": 1, "GPU-c": 2, "GPU-d": 3, "GPU-f": 5, "GPU-g": 6}
	for _, tc := range []struct {
		name  string
		uuids []string
		want  string
	}{
		{"none", nil, "-"},
		{"a run", []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d"}, "0-3"},
		{"gaps, out of order", []string{"GPU-f", "GPU-a", "GPU-c"}, "0,2,5"},
		{"runs and singles", []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-g"}, "0-3,6"},
		{"a node that left", []string{"GPU-b", "GPU-39a9e1c2-0134-8077-8c3b-372188eeb81f"}, "1,GPU-39a9e1c2..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gpuList(tc.uuids, index); got != tc.want {
				t.Errorf("gpuList(%v) = %q, want %q", tc.uuids, got, tc.want)
			}
		})
	}
}

func TestStateCounts_InStatusOrderLeavingOutEmptyStates(t *testing.T) {
	jobs := []structs.Job{{State: structs.JobFailed}, {State: structs.JobRunning}, {State: structs.JobQueued}, {State: structs.JobRunning}}
	if got, want := stateCounts(jobs), "1 queued, 2 running, 1 failed"; got != want {
		t.Errorf("stateCounts = %q, want %q", got, want)
	}
	if got, want := jobsSummary(jobs[:1]), "1 job: 1 failed"; got != want {
		t.Errorf("jobsSummary = %q, want %q", got, want)
	}
}

func TestJob_PrefixOfAnArrayAndOtherJobsStaysAmbiguous(t *testing.T) {
	arr, other := "ab11"+strings.Repeat("0", 28), "ab11"+strings.Repeat("1", 28)
	for _, tc := range []struct {
		name string
		jobs []structs.Job
	}{
		{"an array and a job", []structs.Job{
			{ID: arr + "-0", ArrayID: arr}, {ID: arr + "-1", ArrayID: arr, ArrayIndex: 1}, {ID: other},
		}},
		{"two arrays", []structs.Job{
			{ID: arr + "-0", ArrayID: arr}, {ID: other + "-0", ArrayID: other},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.fail("GET /v1/jobs/{id}", http.StatusBadRequest, "job ab11: ambiguous id: matches 3 jobs (ab110000-0, ab110000-1, ab111111)")
			f.reply("GET /v1/jobs", http.StatusOK, tc.jobs)
			r := runCLI(t, "--addr", f.URL, "job", "ab11")
			if r.code != exitError || !strings.Contains(r.stderr, "ambiguous id: matches 3 jobs") || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and the agent's ambiguity", r.code, r.stdout, r.stderr)
			}
		})
	}
}

func TestJob_NoSuchJobIsNotLookedForAmongArrays(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("GET /v1/jobs/{id}", http.StatusNotFound, "job ffff: job not found")
	r := runCLI(t, "--addr", f.URL, "job", "ffff")
	if r.code != exitError || !strings.Contains(r.stderr, "job ffff: job not found") {
		t.Errorf("exit %d, stderr %q; want 1 and the agent's error", r.code, r.stderr)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want the job's alone", n)
	}
}
