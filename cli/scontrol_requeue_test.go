package cli

import (
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

func TestScontrol_RequeueEachJobAndSayWhatWasRefused(t *testing.T) {
	f := slurmAgent(t)
	f.handle("POST /v1/jobs/{id}/requeue", func(w http.ResponseWriter, r *http.Request) {
		if id := r.PathValue("id"); id != "12" {
			writeJSON(w, http.StatusConflict, api.ErrorBody{Error: "job " + id + ": job already finished (succeeded): only a running or pending job is requeued; submit it again"})
			return
		}
		writeJSON(w, http.StatusOK, structs.Job{ID: "cccccccc3333", Number: 12, State: structs.JobRunning})
	})
	r := runCLI(t, "--addr", f.URL, "scontrol", "requeue", "12,13")
	if r.code != exitError || r.stdout != "" ||
		r.stderr != "scontrol: error: job 13: job 13: job already finished (succeeded): only a running or pending job is requeued; submit it again\n" {
		t.Fatalf("scontrol requeue 12,13: %d %q %q", r.code, r.stdout, r.stderr)
	}
	var asked []string
	for _, req := range f.requests() {
		if strings.HasSuffix(req.Path, "/requeue") {
			asked = append(asked, req.Path)
		}
	}
	if strings.Join(asked, " ") != "/v1/jobs/12/requeue /v1/jobs/13/requeue" {
		t.Errorf("asked %q", asked)
	}
	t.Setenv("SLURM_JOB_ID", "12")
	if r := runCLI(t, "--addr", f.URL, "scontrol", "requeue"); r.code != exitOK || r.stderr != "" {
		t.Errorf("scontrol requeue in a job: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
