package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// stepAgent answers a 3-node job 44's detail and its execs: each rank
// echoes its rank and the command it was given, and rank 1 exits 3.
func stepAgent(t *testing.T) (*fakeAgent, *[]api.ExecRequest) {
	f := newFakeAgent(t)
	var mu sync.Mutex
	var execs []api.ExecRequest
	f.reply("GET /v1/jobs/{id}", http.StatusOK, api.JobDetail{Job: structs.Job{ID: "aaaaaaaa1111", Number: 44,
		State: structs.JobRunning, Spec: structs.JobSpec{Nodes: 3}}})
	f.handle("POST /v1/jobs/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		mu.Lock()
		execs = append(execs, req)
		mu.Unlock()
		code := 0
		if req.Rank == 1 {
			code = 3
		}
		writeJSON(w, http.StatusOK, api.ExecResult{ExitCode: code, Output: "rank " + string(rune('0'+req.Rank)) + "\nok\n"})
	})
	return f, &execs
}

func TestSrun_InAnAllocationRunsATaskOnEachNode(t *testing.T) {
	f, execs := stepAgent(t)
	t.Setenv("SLURM_JOB_ID", "44")
	r := runCLI(t, "--addr", f.URL, "srun", "-N2", "-l", "--gres=gpu:1", "hostname")
	if r.code != 3 || r.stdout != "0: rank 0\n0: ok\n1: rank 1\n1: ok\n" || r.stderr != "" {
		t.Fatalf("srun -N2 -l hostname: %d %q %q; want both tasks' lines, labelled, and rank 1's exit code", r.code, r.stdout, r.stderr)
	}
	if len(*execs) != 2 {
		t.Fatalf("%d execs, want one on each of the first 2 nodes", len(*execs))
	}
	for _, req := range *execs {
		cmd := strings.Join(req.Command, " ")
		if !strings.HasPrefix(cmd, "env SLURM_PROCID=") || !strings.Contains(cmd, "SLURM_NTASKS=2") || !strings.HasSuffix(cmd, " hostname") {
			t.Errorf("rank %d ran %q", req.Rank, cmd)
		}
	}
}

func TestSrun_OutsideAnAllocationWantsPtyAndInOneRefusesWhatItCannotDo(t *testing.T) {
	f, execs := stepAgent(t)
	t.Setenv("SLURM_JOB_ID", "")
	if r := runCLI(t, "--addr", f.URL, "srun", "hostname"); r.code != exitUsage || !strings.Contains(r.stderr, "want --pty") {
		t.Errorf("srun outside an allocation: %d %q", r.code, r.stderr)
	}
	t.Setenv("SLURM_JOB_ID", "44")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ntasks-per-node=2", "x"}, "Error: --ntasks-per-node is not supported by srun in an allocation"},
		{[]string{"-N", "2", "-n", "4", "x"}, "Error: -n 4: a step in an allocation runs one task on each of its nodes"},
		{[]string{"-N", "4", "x"}, "Error: -N 4: job allocation 44 has 3 nodes"},
		{[]string{"--mpi=pmix", "x"}, "Error: --mpi=pmix: skein's srun starts no MPI wire-up"},
		{[]string{"-l"}, "Error: missing the command"},
	} {
		if r := runCLI(t, append([]string{"--addr", f.URL, "srun"}, tc.args...)...); r.code != exitUsage || !strings.HasPrefix(r.stderr, tc.want) {
			t.Errorf("srun %q: %d %q, want 2 %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if len(*execs) != 0 {
		t.Errorf("refused steps ran %d execs", len(*execs))
	}
}
