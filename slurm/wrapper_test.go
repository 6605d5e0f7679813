package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
)

// runWrapper runs a parsed batch's command as a node would, in dir, with
// the variables skein gives a job.
func runWrapper(t *testing.T, b *Batch, dir string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(b.Spec.Command[0], b.Spec.Command[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir(), "USER=alice", "SKEIN_NODE=gpu-01"}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func TestWrapper_RankZeroWritesTheFilesTheOthersOnlyTheirLogs(t *testing.T) {
	script := "#!/bin/sh\n#SBATCH -J demo\n#SBATCH -o logs/%x-%j-%N.out\n#SBATCH -e logs/%x-%A_%3a.%u.err\n" +
		"echo \"out $0 $# $1 $2\"; echo err >&2; exit 3\n"
	b, err := Parse(Input{Path: "demo.sh", Script: []byte(script), Args: []string{"a b", "c"}, SubmitDir: "/work"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runWrapper(t, b, dir, "SKEIN_RANK=0", "SLURM_JOB_ID=17", "SLURM_ARRAY_JOB_ID=10", "SLURM_ARRAY_TASK_ID=7")
	if code != 3 || !strings.HasPrefix(stdout, "out ") || !strings.HasSuffix(stdout, " 2 a b c\n") || stderr != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q: want 3, the script's output with its arguments", code, stdout, stderr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "logs", "demo-17-gpu-01.out")); err != nil || string(got) != stdout {
		t.Fatalf("-o file: %q, %v; want %q", got, err, stdout)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "logs", "demo-10_007.alice.err")); err != nil || string(got) != "err\n" {
		t.Fatalf("-e file: %q, %v", got, err)
	}
	// The script ran from a temporary file, removed at the end.
	if script := strings.Fields(stdout)[1]; !strings.Contains(script, "skein-sbatch.") {
		t.Errorf("$0 = %q, want the temporary copy", script)
	} else if _, err := os.Stat(script); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the script's temporary copy %s is still there: %v", script, err)
	}

	other := t.TempDir()
	if _, _, code := runWrapper(t, b, other, "SKEIN_RANK=1", "SLURM_JOB_ID=17"); code != 3 {
		t.Fatalf("rank 1: exit %d, want 3", code)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Fatalf("rank 1 wrote %v; only rank 0 writes the files", entries)
	}
}

func TestWrapper_DefaultOutputTakesBothStreamsAndAppendKeepsOldContent(t *testing.T) {
	script := "#!/bin/sh\necho one; echo two >&2\n"
	dir := t.TempDir()
	b, err := Parse(Input{Path: "x.sh", Script: []byte(script), SubmitDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	runWrapper(t, b, dir, "SKEIN_RANK=0", "SLURM_JOB_ID=41")
	got, err := os.ReadFile(filepath.Join(dir, "slurm-41.out"))
	if err != nil || !strings.Contains(string(got), "one\n") || !strings.Contains(string(got), "two\n") || len(got) != 8 {
		t.Fatalf("slurm-41.out = %q, %v; want both lines", got, err)
	}
	runWrapper(t, b, dir, "SKEIN_RANK=0", "SLURM_JOB_ID=41")
	if again, _ := os.ReadFile(filepath.Join(dir, "slurm-41.out")); len(again) != 8 {
		t.Fatalf("a second run without --open-mode=append: %q, want it truncated first", again)
	}
	b, err = Parse(Input{Path: "x.sh", Script: []byte(script), Options: []string{"--open-mode=append"}, SubmitDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	runWrapper(t, b, dir, "SKEIN_RANK=0", "SLURM_JOB_ID=41")
	if again, _ := os.ReadFile(filepath.Join(dir, "slurm-41.out")); len(again) != 16 {
		t.Fatalf("with --open-mode=append: %q, want both runs", again)
	}
}

func TestWrapper_AnOutputFileThatCannotBeOpenedFailsTheJob(t *testing.T) {
	b, err := Parse(Input{Path: "x.sh", Script: []byte("#!/bin/sh\n#SBATCH -o nodir/out\necho ran\n"), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runWrapper(t, b, t.TempDir(), "SKEIN_RANK=0", "SLURM_JOB_ID=3")
	if code != 1 || stdout != "" {
		t.Fatalf("exit %d, stdout %q: want 1 and the script not run", code, stdout)
	}
}

// TestWrapper_SignalsReachTheScriptAndTheOutputSurvives: the time-limit
// signal and a cancel's SIGTERM go to the job's process group; the script
// traps it, and its last words still reach the -o file.
func TestWrapper_SignalsReachTheScriptAndTheOutputSurvives(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\ntrap 'echo checkpoint; exit 0' USR1\necho started\nwhile :; do sleep 0.05; done\n"
	b, err := Parse(Input{Path: "x.sh", Script: []byte(script), SubmitDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(b.Spec.Command[0], b.Spec.Command[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SKEIN_RANK=0", "SLURM_JOB_ID=8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "slurm-8.out")
	waitStarted(t, file)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the wrapper: %v, want exit 0 from the script's trap", err)
	}
	// The file has stderr too: the shell may say its sleep was signalled.
	if got, _ := os.ReadFile(file); !strings.HasPrefix(string(got), "started\n") || !strings.Contains(string(got), "\ncheckpoint\n") || out.String() != "started\ncheckpoint\n" {
		t.Fatalf("file %q, stdout %q: want the output after the signal too", got, out.String())
	}
}

// TestWrapper_ACancelStopsTheScriptAndKeepsItsOutput: SIGTERM to the
// group (skein cancel) ends a script that does not trap it; the wrapper
// waits for it and says how it ended, and the file keeps what it wrote.
func TestWrapper_ACancelStopsTheScriptAndKeepsItsOutput(t *testing.T) {
	dir := t.TempDir()
	b, err := Parse(Input{Path: "x.sh", Script: []byte("#!/bin/sh\necho started\nexec sleep 60\n"), SubmitDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(b.Spec.Command[0], b.Spec.Command[1:]...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SKEIN_RANK=0", "SLURM_JOB_ID=9"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "slurm-9.out")
	waitStarted(t, file)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("the wrapper: %v (exit %d), want 143: the script's end by SIGTERM", err, code)
	}
	// sh may add that the script was terminated, as Slurm adds its line.
	if got, _ := os.ReadFile(file); !strings.HasPrefix(string(got), "started\n") {
		t.Fatalf("file %q after the cancel", got)
	}
}

// waitStarted waits until the script's output file says "started".
func waitStarted(t *testing.T, file string) {
	t.Helper()
	testutil.WaitFor(t, 10*time.Second, func() error {
		if got, err := os.ReadFile(file); err != nil || string(got) != "started\n" {
			return fmt.Errorf("the script did not start: %q, %v", got, err)
		}
		return nil
	})
}

// srunScript runs the wrapper of a script on one rank of a two-node job,
// as the agent would start it there.
func srunScript(t *testing.T, script string, rank int) (stdout, stderr string, code int) {
	t.Helper()
	b, err := Parse(Input{Path: "steps.sh", Script: []byte("#!/bin/sh\n#SBATCH -N 2\n" + script), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	return runWrapper(t, b, t.TempDir(), fmt.Sprintf("SKEIN_RANK=%d", rank), "SLURM_JOB_ID=3", "SLURM_NNODES=2")
}

// sortedLines sorts the lines of output whose tasks ran at once.
func sortedLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func TestSrun_RunsTheCommandAsThisNodesTasks(t *testing.T) {
	script := `srun sh -c 'echo "one $SLURM_PROCID/$SLURM_NTASKS $SLURM_LOCALID $SLURM_STEP_NUM_NODES"'
srun -N1 sh -c 'echo "first node $SLURM_PROCID"'
srun -n 1 echo "one task"
srun --ntasks-per-node=2 -l -- sh -c 'echo "task $SLURM_PROCID local $SLURM_LOCALID of $SLURM_NTASKS"; echo oops >&2'
srun -n4 --gpus-per-task=1 -c 8 --mpi=none -K1 sh -c 'exit $((SLURM_PROCID + 3))'
echo "rc $?"
`
	for _, tc := range []struct {
		rank           int
		stdout, stderr string
	}{
		{0, "one 0/2 0 2\nfirst node 0\none task\n0: task 0 local 0 of 4\n1: task 1 local 1 of 4\nrc 4\n", "0: oops\n1: oops"},
		// The other node runs its share, and nothing of a step on fewer nodes.
		{1, "one 1/2 0 2\n2: task 2 local 0 of 4\n3: task 3 local 1 of 4\nrc 6\n", "2: oops\n3: oops"},
	} {
		stdout, stderr, code := srunScript(t, script, tc.rank)
		lines := strings.Split(stdout, "\n")
		// Only the labelled tasks ran at once: their lines may come in any order.
		want := strings.Split(tc.stdout, "\n")
		if code != 0 || len(lines) != len(want) || sortedLines(stdout) != sortedLines(tc.stdout) ||
			sortedLines(stderr) != tc.stderr {
			t.Errorf("rank %d: exit %d\nstdout %q\nwant   %q\nstderr %q\nwant   %q", tc.rank, code, stdout, tc.stdout, stderr, tc.stderr)
		}
	}
}

func TestSrun_RefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct{ name, args, want string }{
		{"mpi", "--mpi=pmix ./a.out", "--mpi=pmix: skein's srun starts no MPI wire-up (PMI)"},
		{"unknown option", "--het-group=1 true", "--het-group is not supported by skein's srun"},
		{"more nodes than the job", "-N 3 true", "-N 3: the job has 2 nodes"},
		{"uneven tasks", "-n 3 true", "-n 3 on 2 nodes: skein's srun runs the same number of tasks on every node; give a multiple of 2"},
		{"tasks and tasks per node disagree", "-n 2 --ntasks-per-node=2 true", "-n 2 with --ntasks-per-node=2 on 2 nodes: want 4 tasks"},
		{"not a number", "--ntasks=two true", "--ntasks two: want a whole number above 0"},
		{"value missing", "-N", "-N needs a value"},
		{"value on a flag", "--label=yes true", "--label=yes: --label takes no value"},
		{"no command", "-l", "missing the command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := srunScript(t, "srun "+tc.args+"\necho \"rc $?\"\n", 0)
			if code != 0 || stdout != "rc 2\n" || !strings.HasPrefix(stderr, "srun: error: "+tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q: want rc 2 and %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestSrun_SignalsReachTheTasksAndSrunWaitsForThem: a signal to the job's
// process group (--signal, a cancel) reaches every task; srun and the
// labels outlive it, and srun exits with the tasks' exit code. The script
// gets it too, and traps it to carry on.
func TestSrun_SignalsReachTheTasksAndSrunWaitsForThem(t *testing.T) {
	script := "#!/bin/sh\ntrap 'echo script signalled' USR1\nsrun --ntasks-per-node=2 -l sh -c 'trap \"echo bye; exit 5\" USR1; echo started; while :; do sleep 0.05; done'\n" +
		"echo \"srun $?\"\n"
	b, err := Parse(Input{Path: "x.sh", Script: []byte(script), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(b.Spec.Command[0], b.Spec.Command[1:]...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + t.TempDir(), "SKEIN_RANK=1", "SLURM_JOB_ID=8", "SLURM_NNODES=2"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outFile := filepath.Join(cmd.Dir, "stdout")
	out, err := os.Create(outFile)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := func() string { b, _ := os.ReadFile(outFile); return string(b) }
	testutil.WaitFor(t, 10*time.Second, func() error {
		if got := read(); strings.Count(got, "started") != 2 {
			return fmt.Errorf("the tasks did not both start: %q", got)
		}
		return nil
	})
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the wrapper: %v, want exit 0 from the script", err)
	}
	want := "2: bye\n2: started\n3: bye\n3: started\nscript signalled\nsrun 5"
	if got := read(); sortedLines(got) != want || !strings.HasSuffix(got, "\nscript signalled\nsrun 5\n") {
		t.Fatalf("stdout %q, want the tasks' last words, then the script's trap and srun's exit code 5", got)
	}
}

// TestSrun_StartsTheJobsTasksPerNodeByDefault: sbatch's --ntasks-per-node
// is what a bare srun starts on each node, and what the script sees.
func TestSrun_StartsTheJobsTasksPerNodeByDefault(t *testing.T) {
	stdout, stderr, code := srunScript(t, "#SBATCH --ntasks-per-node=3\n"+
		"echo \"script $SLURM_NTASKS_PER_NODE/$SLURM_NTASKS\"\n"+
		"srun sh -c 'echo \"task $SLURM_PROCID of $SLURM_NTASKS\"'\n", 1)
	want := "script 3/6\ntask 3 of 6\ntask 4 of 6\ntask 5 of 6"
	if code != 0 || sortedLines(stdout) != want || !strings.HasPrefix(stdout, "script 3/6\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
}

// TestWrapper_ScontrolShowHostnamesInAJob: the script finds scontrol on
// its PATH; without skein on the node it still expands the job's host
// list, one name a line; with skein it is skein's scontrol.
func TestWrapper_ScontrolShowHostnamesInAJob(t *testing.T) {
	b, err := Parse(Input{Path: "h.sh", Script: []byte("#!/bin/sh\nscontrol show hostnames\nscontrol show hostnames 'x[8-10]-ib,y'\nscontrol show job\necho rc=$?\n"), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runWrapper(t, b, t.TempDir(), "SKEIN_RANK=1", "SLURM_JOB_NODELIST=gpu[01-03,07],login")
	want := "gpu01\ngpu02\ngpu03\ngpu07\nlogin\nx8-ib\nx9-ib\nx10-ib\ny\nrc=1\n"
	if code != 0 || stdout != want || !strings.Contains(stderr, "skein is not on this node's PATH") {
		t.Fatalf("without skein: exit %d, stdout %q, stderr %q; want %q and an error for show job", code, stdout, stderr, want)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "skein"), []byte("#!/bin/sh\necho \"skein $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err = Parse(Input{Path: "h.sh", Script: []byte("#!/bin/sh\nPATH=$PATH:" + bin + "\nscontrol show job 7\n"), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := runWrapper(t, b, t.TempDir(), "SKEIN_RANK=1"); code != 0 || stdout != "skein scontrol show job 7\n" {
		t.Fatalf("with skein: exit %d, stdout %q, stderr %q; want skein's scontrol", code, stdout, stderr)
	}
}

func TestDescribe_ABatchScriptIsShownAsOneNotAsItsWrapper(t *testing.T) {
	b, err := Parse(Input{Path: "train.sh", Script: []byte("#!/bin/bash\n#SBATCH -N 1\necho hi\n"), Args: []string{"--lr", "0.1"}, SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Describe(b.Spec.Command), "batch script (#!/bin/bash, 3 lines) --lr 0.1"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got := Describe([]string{"python", "train.py"}); got != "" {
		t.Errorf("Describe of a plain command = %q, want empty", got)
	}
}

// TestWrapper_EveryRanksSrunOutputReachesTheOutputFile: rank 0 writes the
// -o file (its srun's output with the script's), and a rank above 0
// appends its srun tasks' output to it, stdout and stderr, labelled
// with -l, as Slurm gathers a step's output; what rank 1's script prints
// outside srun stays in its own log.
func TestWrapper_EveryRanksSrunOutputReachesTheOutputFile(t *testing.T) {
	script := "#!/bin/sh\n#SBATCH -N 2\n#SBATCH -o job-%N.out\necho \"script on $SLURM_NODEID\"\n" +
		"srun sh -c 'echo out from $SLURM_PROCID; echo err from $SLURM_PROCID >&2'\nsrun -l echo labelled\n"
	b, err := Parse(Input{Path: "steps.sh", Script: []byte(script), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for rank := range 2 {
		stdout, stderr, code := runWrapper(t, b, dir, fmt.Sprintf("SKEIN_RANK=%d", rank), "SLURM_JOB_ID=5", "SLURM_NNODES=2",
			fmt.Sprintf("SLURM_NODEID=%d", rank), fmt.Sprintf("SKEIN_NODE=node%d", rank+1), "SKEIN_HEAD_NODE=node1")
		if code != 0 {
			t.Fatalf("rank %d: exit %d, stdout %q, stderr %q", rank, code, stdout, stderr)
		}
		if rank == 1 && (!strings.Contains(stdout, "script on 1") || !strings.Contains(stdout, "out from 1") || !strings.Contains(stderr, "err from 1")) {
			t.Errorf("rank 1's own log: stdout %q, stderr %q; want all it printed", stdout, stderr)
		}
	}
	got, err := os.ReadFile(filepath.Join(dir, "job-node1.out"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"script on 0\n", "out from 0\n", "err from 0\n", "0: labelled\n", "out from 1\n", "err from 1\n", "1: labelled\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("job-node1.out lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "script on 1") {
		t.Errorf("job-node1.out has rank 1's output outside srun:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "job-node2.out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank 1 made a file of its own: %v", err)
	}
}
