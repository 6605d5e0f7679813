package cli

import (
	"net/http"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestCancel_SaysWhetherJobEndedOrIsStopping(t *testing.T) {
	cases := []struct {
		name string
		job  structs.Job
		want string
	}{
		{"queued job ends at once", structs.Job{ID: testJobID, State: structs.JobCancelled}, "cancelled abcdef01\n"},
		{"running job is stopping", structs.Job{ID: testJobID, State: structs.JobRunning, StopRequested: true}, "stopping abcdef01\n"},
		{"finished job stays as it was", structs.Job{ID: testJobID, State: structs.JobSucceeded}, "job abcdef01 already succeeded\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAgent(t)
			f.reply("DELETE /v1/jobs/{id}", http.StatusOK, tc.job)
			r := runCLI(t, "--addr", f.URL, "cancel", "abcdef01")
			if r.code != exitOK || r.stdout != tc.want {
				t.Fatalf("got code %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, tc.want)
			}
			if req := f.requests()[0]; req.Method != http.MethodDelete || req.Path != "/v1/jobs/abcdef01" {
				t.Errorf("request %s %s, want DELETE /v1/jobs/abcdef01", req.Method, req.Path)
			}
		})
	}
}

func TestCancel_UnknownJobIsError(t *testing.T) {
	f := newFakeAgent(t)
	f.fail("DELETE /v1/jobs/{id}", http.StatusNotFound, `job "zz": not found`)
	r := runCLI(t, "--addr", f.URL, "cancel", "zz")
	if r.code != exitError || r.stderr != "Error: job \"zz\": not found\n" {
		t.Fatalf("got code %d, stderr %q", r.code, r.stderr)
	}
}

// Cancelling an array names every task it reached, not only the last.
func TestCancel_AnArrayNamesEveryTask(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("DELETE /v1/jobs/{id}", http.StatusOK, []structs.Job{
		{ID: "aaaaaaaa11", State: structs.JobRunning, StopRequested: true},
		{ID: "bbbbbbbb22", State: structs.JobCancelled},
		{ID: "cccccccc33", State: structs.JobCancelled},
	})
	r := runCLI(t, "--addr", f.URL, "cancel", "arr")
	if want := "stopping aaaaaaaa\ncancelled bbbbbbbb\ncancelled cccccccc\n"; r.code != exitOK || r.stdout != want {
		t.Fatalf("got code %d, stdout %q, stderr %q; want %q", r.code, r.stdout, r.stderr, want)
	}
}
