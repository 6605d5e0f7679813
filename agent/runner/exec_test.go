package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// execCtx bounds a test's Exec loosely, for a busy machine.
func execCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitExec waits until the allocation's job has started and Exec of argv
// runs, and returns what it gave.
func waitExec(t *testing.T, r *Runner, id string, argv ...string) ExecResult {
	t.Helper()
	var res ExecResult
	waitFor(t, 15*time.Second, "an exec for "+id, func() (bool, string) {
		var err error
		res, err = r.Exec(execCtx(t), id, argv)
		return err == nil, errString(err)
	})
	return res
}

func TestExec_ProcessJobsCommandRunsAsTheJobWithItsEnvAndWorkdir(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh("sleep 3600")
	tk.Job.Spec.Env = map[string]string{"CHECK_ME": "yes"}
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	res := waitExec(t, r, tk.Alloc.ID, "sh", "-c", `echo "$CHECK_ME $(id -u) $PWD"; echo err >&2; exit 4`)
	uid := os.Geteuid()
	if uid == 0 {
		uid = int(jobUser(t).UID)
	}
	want := "yes " + strconv.Itoa(uid) + " " + filepath.Join(e.allocDir, tk.Alloc.ID, workDirName) + "\n"
	if res.ExitCode != 4 || !strings.Contains(res.Output, want) || !strings.Contains(res.Output, "err\n") {
		t.Errorf("exec gave code %d, output %q; want code 4 and %q with stderr", res.ExitCode, res.Output, want)
	}
}

func TestExec_ACommandPastItsContextIsKilledWithItsGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh("sleep 3600")
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	waitExec(t, r, tk.Alloc.ID, "true")
	// The child writes its pid, and the command then waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := r.Exec(ctx, tk.Alloc.ID, []string{"sh", "-c", "sleep 600 & echo $! > child.pid; wait"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec past its deadline: %v, want the context's deadline", err)
	}
	b, err := os.ReadFile(filepath.Join(e.allocDir, tk.Alloc.ID, workDirName, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the command's child to be killed", func() (bool, string) {
		err := syscall.Kill(pid, 0)
		state, _, _ := procStat(pid)
		return errors.Is(err, syscall.ESRCH) || state == 'Z', "pid " + strconv.Itoa(pid) + " still there"
	})
	if !tracked(r, tk.Alloc.ID) {
		t.Error("the job ended with its exec")
	}
}

func TestExec_RefusesWhatIsNotRunningAndSaysWhyACommandCannotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	if _, err := r.Exec(execCtx(t), "no-such-alloc", []string{"true"}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("exec for an unknown allocation: %v, want ErrNotRunning", err)
	}
	over := sh("exit 0")
	mustStart(t, r, over)
	waitTerminal(t, rec, over.Alloc.ID)
	if _, err := r.Exec(execCtx(t), over.Alloc.ID, []string{"true"}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("exec for an allocation that is over: %v, want ErrNotRunning", err)
	}
	live := sh("sleep 3600")
	mustStart(t, r, live)
	waitState(t, rec, live.Alloc.ID, structs.AllocRunning)
	waitExec(t, r, live.Alloc.ID, "true")
	if _, err := r.Exec(execCtx(t), live.Alloc.ID, nil); !errors.Is(err, ErrNoCommand) {
		t.Errorf("exec of no command: %v, want ErrNoCommand", err)
	}
	_, err := r.Exec(execCtx(t), live.Alloc.ID, []string{"no-such-check"})
	if err == nil || !strings.Contains(err.Error(), "no-such-check") || !strings.Contains(err.Error(), "PATH") {
		t.Errorf("exec of a program the job's PATH lacks: %v, want an error naming it and the PATH", err)
	}
}

func TestExec_ImageJobsCommandRunsInItsContainerAsItsAccount(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh("sleep 3600")
	tk.Job.Spec.Env = map[string]string{"CHECK_ME": "in-the-container"}
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	res := waitExec(t, r, tk.Alloc.ID, "sh", "-c", `echo "$CHECK_ME $(id -u)"; exit 5`)
	want := "in-the-container " + strconv.Itoa(int(jobUser(t).UID)) + "\n"
	if os.Geteuid() != 0 {
		want = "in-the-container " + strconv.Itoa(os.Geteuid()) + "\n"
	}
	if res.ExitCode != 5 || res.Output != want {
		t.Errorf("exec gave code %d, output %q; want code 5 and %q", res.ExitCode, res.Output, want)
	}
}

// An image job's exec past its context is killed in its container, with
// what it started, and the job runs on.
func TestExec_AnImageJobsCommandPastItsContextIsKilledInItsContainer(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh("sleep 3600")
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	waitExec(t, r, tk.Alloc.ID, "true")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := r.Exec(ctx, tk.Alloc.ID, []string{"sh", "-c", "sleep 604 & sleep 605; wait"})
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "may run on") {
		t.Fatalf("exec past its deadline: %v, want the context's deadline and its command killed", err)
	}
	waitFor(t, 15*time.Second, "the command and its child to be killed in the container", func() (bool, string) {
		res, err := r.Exec(execCtx(t), tk.Alloc.ID, []string{"ps"})
		return err == nil && !strings.Contains(res.Output, "sleep 60"), res.Output + errString(err)
	})
	if !tracked(r, tk.Alloc.ID) {
		t.Error("the job ended with its exec")
	}
}

func TestTailWriter_KeepsTheEnd(t *testing.T) {
	w := &tailWriter{max: 8}
	for _, s := range []string{"abc", "defgh", "ijklmnopq", "r"} {
		w.Write([]byte(s))
	}
	if got := w.String(); got != "klmnopqr" {
		t.Errorf("kept %q, want the last 8 bytes %q", got, "klmnopqr")
	}
}
