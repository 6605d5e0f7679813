package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// corpusStubs are the programs the corpus's scripts call, stood in for
// by a script that says it ran: what matters is that the batch script
// runs unchanged up to them, with what they are given.
var corpusStubs = []string{"python", "python3", "torchrun", "deepspeed", "mpirun", "nvidia-smi", "module",
	"simulate", "lammps", "all_reduce_perf", "serve_forever.sh", "run_case.sh", "notify_failure.sh", "nightly.sh", "cleanup.sh"}

// TestCorpus_AcceptedScriptsRunUnchanged runs every script of the corpus
// that Parse accepts, as the job's command it makes, on each rank of the
// job (at most two), with the variables skein gives a job and the
// programs it calls stubbed: each runs to its end (exit 0), and rank 0
// writes its -o file. Those Parse refuses are the corpus's golden errors
// (TestParse_Corpus), each naming the directive and why.
func TestCorpus_AcceptedScriptsRunUnchanged(t *testing.T) {
	scripts, err := filepath.Glob("testdata/scripts/*.sh")
	if err != nil || len(scripts) < 40 {
		t.Fatalf("corpus: %d scripts (%v), want at least 40", len(scripts), err)
	}
	stubs := t.TempDir()
	for _, s := range corpusStubs {
		if err := os.WriteFile(filepath.Join(stubs, s), []byte("#!/bin/sh\necho \"ran ${0##*/} $*\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ran, refused := 0, 0
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".sh")
		b, err := Parse(corpusInput(t, path))
		if err != nil {
			if !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrBadValue) && !errors.Is(err, ErrNotScript) {
				t.Errorf("%s: refused without naming why: %v", name, err)
			}
			refused++
			continue
		}
		ran++
		t.Run(name, func(t *testing.T) {
			nodes := min(b.Spec.Nodes, 2)
			for rank := range nodes {
				dir := t.TempDir()
				for _, d := range []string{"logs", "out", "sweep"} { // where the scripts write, as on a Slurm cluster, must exist
					if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				for _, s := range corpusStubs { // ./simulate and the like
					if err := os.Symlink(filepath.Join(stubs, s), filepath.Join(dir, s)); err != nil {
						t.Fatal(err)
					}
				}
				out, errOut, code := runCorpusJob(t, b, dir, stubs, rank, nodes)
				if code != 0 {
					t.Fatalf("rank %d: exit %d\nstdout %q\nstderr %q", rank, code, truncate(out), truncate(errOut))
				}
				if n := writtenFiles(t, dir); rank == 0 && n == 0 {
					t.Errorf("rank 0 wrote no output file (-o %s)", b.Output)
				}
			}
		})
	}
	if ran < 30 || refused < 5 {
		t.Errorf("%d scripts ran and %d were refused: the corpus should hold both", ran, refused)
	}
}

// runCorpusJob runs the job's command as one rank of a job on nodes
// node1..nodeN would, in dir, the stubs first on its PATH.
func runCorpusJob(t *testing.T, b *Batch, dir, stubs string, rank, nodes int) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(b.Spec.Command[0], b.Spec.Command[1:]...)
	cmd.Dir = dir
	env := []string{"PATH=" + stubs + ":/usr/bin:/bin", "TMPDIR=" + t.TempDir(), "USER=alice", "HOME=" + dir,
		"SKEIN_RANK=" + strconv.Itoa(rank), "SKEIN_NODE=node" + strconv.Itoa(rank+1),
		"SLURM_JOB_ID=41", "SLURM_JOBID=41", "SLURM_NNODES=" + strconv.Itoa(nodes), "SLURM_NODEID=" + strconv.Itoa(rank),
		"SLURM_PROCID=" + strconv.Itoa(rank), "SLURM_JOB_NODELIST=node[1-" + strconv.Itoa(nodes) + "]",
		"SLURM_GPUS_ON_NODE=" + strconv.Itoa(b.Spec.GPUs), "SLURM_CPUS_ON_NODE=8", "SLURM_JOB_PARTITION=skein",
		"SLURM_TASKS_PER_NODE=1", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500"}
	if a := b.Spec.Array; a != nil {
		env = append(env, "SLURM_ARRAY_JOB_ID=41", fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", a.Start),
			fmt.Sprintf("SLURM_ARRAY_TASK_COUNT=%d", a.Len()))
	}
	for k, v := range b.Spec.Env {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// truncate keeps failure messages small.
func truncate(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// writtenFiles counts the regular files under dir (the stubs are links).
func writtenFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
