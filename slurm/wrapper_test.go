package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	stdout, stderr, code := runWrapper(t, b, dir, "SKEIN_RANK=0", "SKEIN_JOB_ID=abc-7", "SKEIN_ARRAY_ID=abc", "SKEIN_ARRAY_INDEX=7")
	if code != 3 || !strings.HasPrefix(stdout, "out ") || !strings.HasSuffix(stdout, " 2 a b c\n") || stderr != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q: want 3, the script's output with its arguments", code, stdout, stderr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "logs", "demo-abc-7-gpu-01.out")); err != nil || string(got) != stdout {
		t.Fatalf("-o file: %q, %v; want %q", got, err, stdout)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "logs", "demo-abc_007.alice.err")); err != nil || string(got) != "err\n" {
		t.Fatalf("-e file: %q, %v", got, err)
	}
	// The script ran from a temporary file, removed at the end.
	if script := strings.Fields(stdout)[1]; !strings.Contains(script, "skein-sbatch.") {
		t.Errorf("$0 = %q, want the temporary copy", script)
	} else if _, err := os.Stat(script); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the script's temporary copy %s is still there: %v", script, err)
	}

	other := t.TempDir()
	if _, _, code := runWrapper(t, b, other, "SKEIN_RANK=1", "SKEIN_JOB_ID=abc-7"); code != 3 {
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
	runWrapper(t, b, dir, "SKEIN_RANK=0", "SKEIN_JOB_ID=j1")
	got, err := os.ReadFile(filepath.Join(dir, "slurm-j1.out"))
	if err != nil || !strings.Contains(string(got), "one\n") || !strings.Contains(string(got), "two\n") || len(got) != 8 {
		t.Fatalf("slurm-j1.out = %q, %v; want both lines", got, err)
	}
	runWrapper(t, b, dir, "SKEIN_RANK=0", "SKEIN_JOB_ID=j1")
	if again, _ := os.ReadFile(filepath.Join(dir, "slurm-j1.out")); len(again) != 8 {
		t.Fatalf("a second run without --open-mode=append: %q, want it truncated first", again)
	}
	b, err = Parse(Input{Path: "x.sh", Script: []byte(script), Options: []string{"--open-mode=append"}, SubmitDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	runWrapper(t, b, dir, "SKEIN_RANK=0", "SKEIN_JOB_ID=j1")
	if again, _ := os.ReadFile(filepath.Join(dir, "slurm-j1.out")); len(again) != 16 {
		t.Fatalf("with --open-mode=append: %q, want both runs", again)
	}
}

func TestWrapper_AnOutputFileThatCannotBeOpenedFailsTheJob(t *testing.T) {
	b, err := Parse(Input{Path: "x.sh", Script: []byte("#!/bin/sh\n#SBATCH -o nodir/out\necho ran\n"), SubmitDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runWrapper(t, b, t.TempDir(), "SKEIN_RANK=0", "SKEIN_JOB_ID=j")
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
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SKEIN_RANK=0", "SKEIN_JOB_ID=sig"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "slurm-sig.out")
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
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SKEIN_RANK=0", "SKEIN_JOB_ID=term"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "slurm-term.out")
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
