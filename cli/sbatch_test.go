package cli

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

func TestSbatch_SubmitsTheScriptWithItsDirectivesAndTheCommandLineOverrides(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	dir := t.TempDir()
	t.Chdir(dir) // sbatch runs in the submit directory
	script := "#!/bin/bash\n#SBATCH -J train\n#SBATCH -N 2\n#SBATCH --gres=gpu:h100:8\n#SBATCH -t 1-00:00\n#SBATCH -o logs/%x-%j.out\n\ntorchrun train.py \"$@\"\n"
	writeTestFile(t, filepath.Join(dir, "train.sh"), script)
	r := runCLI(t, "--addr", f.URL, "sbatch", "-t", "90", "--export=NCCL_DEBUG=INFO", "train.sh", "--lr", "0.1")
	if r.code != exitOK || r.stdout != "Submitted batch job "+testJobID+"\n" || r.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	reqs := submitted(t, f)
	if len(reqs) != 1 || reqs[0].RequestID == "" {
		t.Fatalf("submits %+v, want one with a request ID", reqs)
	}
	s := reqs[0].Spec
	if s.Name != "train" || s.Nodes != 2 || s.GPUs != 8 || s.GPUModel != "h100" || s.TimeLimit != structs.Duration(90*time.Minute) || s.Workdir != dir {
		t.Errorf("spec %+v: want the script's name, nodes and GPUs, the command line's time, the submit directory", s)
	}
	if s.Env["NCCL_DEBUG"] != "INFO" || s.Env["SLURM_SUBMIT_DIR"] != dir {
		t.Errorf("env %v", s.Env)
	}
	// sh runs the wrapper, which gets the script, then the script's arguments.
	if len(s.Command) != 7 || s.Command[0] != "/bin/sh" || s.Command[1] != "-c" || s.Command[4] != script ||
		!reflect.DeepEqual(s.Command[5:], []string{"--lr", "0.1"}) || !strings.Contains(s.Command[2], `'logs/''train''-'"$SLURM_JOB_ID"'.out'`) {
		t.Errorf("command %q", s.Command)
	}

	r = runCLI(t, "--addr", f.URL, "sbatch", "--parsable", "train.sh")
	if r.code != exitOK || r.stdout != testJobID+"\n" {
		t.Fatalf("--parsable: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestSbatch_UnsupportedDirectivesAreRefusedAndNothingIsSubmitted(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	dir := t.TempDir()
	t.Chdir(dir) // sbatch runs in the submit directory
	writeTestFile(t, filepath.Join(dir, "old.sh"), "#!/bin/sh\n#SBATCH --licenses=matlab\n#SBATCH --tmp=10G\n#SBATCH --exclusive\n#SBATCH --account=p1\necho\n")
	r := runCLI(t, "--addr", f.URL, "sbatch", "old.sh")
	if r.code != exitUsage || !strings.Contains(r.stderr, "old.sh: line 2: --licenses=matlab: skein has no licenses") ||
		!strings.Contains(r.stderr, "old.sh: line 3: --tmp=10G: skein does not reserve disk") || strings.Contains(r.stderr, "--account") || len(f.requests()) != 0 {
		t.Fatalf("exit %d, stderr %q, %d requests: want 2, both listed, nothing sent", r.code, r.stderr, len(f.requests()))
	}
	r = runCLI(t, "--addr", f.URL, "sbatch", "--ignore-unknown", "old.sh")
	reqs := submitted(t, f)
	if r.code != exitOK || len(reqs) != 1 || !reqs[0].Spec.Exclusive || reqs[0].Spec.Account != "p1" {
		t.Fatalf("--ignore-unknown: exit %d, stderr %q, %d requests: want the job sent, --exclusive and --account kept", r.code, r.stderr, len(reqs))
	}
	for _, want := range []string{"warning: left out: old.sh: line 2: --licenses=matlab", "warning: left out: old.sh: line 3: --tmp=10G"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "warning:"); n != 2 {
		t.Errorf("%d warnings, want the 2 left out:\n%s", n, r.stderr)
	}
}

func TestSbatch_BadInputIsAUsageErrorNamingTheLine(t *testing.T) {
	f := newFakeAgent(t)
	acceptSubmit(f)
	dir := t.TempDir()
	t.Chdir(dir) // sbatch runs in the submit directory
	writeTestFile(t, filepath.Join(dir, "bad.sh"), "#!/bin/sh\n#SBATCH --time=1:2:3:4\n")
	writeTestFile(t, filepath.Join(dir, "ok.sh"), "#!/bin/sh\necho\n")
	writeTestFile(t, filepath.Join(dir, "big.sh"), "#!/bin/sh\n"+strings.Repeat("#", 64<<10))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bad.sh"}, exitUsage, `bad.sh: line 2: --time=1:2:3:4: bad value: time "1:2:3:4": want MINUTES`},
		{[]string{"-N", "0", "ok.sh"}, exitUsage, "command line: -N 0: bad value: 0 is out of range 1..1024"},
		{[]string{"-N", "2"}, exitUsage, "missing the batch script"},
		{[]string{"missing.sh"}, exitError, "open missing.sh: no such file or directory"},
		{[]string{"big.sh"}, exitError, "big.sh: script too large: more than the limit of 65536 bytes"},
		{[]string{"--array=0-3", "--wait", "ok.sh"}, exitUsage, "--wait waits for one job; it cannot be used with --array"},
		{[]string{"--signal=USR1", "ok.sh"}, exitUsage, "command line: --signal=USR1: bad value: the signal is sent before the time limit, but no --time is given"},
	} {
		r := runCLI(t, append([]string{"--addr", f.URL, "sbatch"}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sbatch %q: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if len(f.requests()) != 0 {
		t.Fatalf("%d requests sent for bad input", len(f.requests()))
	}
}

func TestSbatch_ArrayPrintsTheArrayID(t *testing.T) {
	f := newFakeAgent(t)
	f.reply("POST /v1/jobs", 201, structs.Job{ID: testJobID + "-0", ArrayID: testJobID, State: structs.JobQueued})
	dir := t.TempDir()
	t.Chdir(dir) // sbatch runs in the submit directory
	writeTestFile(t, filepath.Join(dir, "a.sh"), "#!/bin/sh\n#SBATCH --array=0-9%2\necho $SLURM_ARRAY_TASK_ID\n")
	r := runCLI(t, "--addr", f.URL, "sbatch", "a.sh")
	if r.code != exitOK || r.stdout != "Submitted batch job "+testJobID+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if a := submitted(t, f)[0].Spec.Array; a == nil || *a != (structs.ArraySpec{Start: 0, End: 9, MaxRunning: 2}) {
		t.Fatalf("array %+v", a)
	}
}
