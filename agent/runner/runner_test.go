package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestRunner_ExitCodesDecideTheState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	cases := []struct {
		name   string
		script string
		state  structs.AllocState
		code   int
		reason string
	}{
		{name: "exit 0 succeeds", script: "exit 0", state: structs.AllocSucceeded, code: 0, reason: "exited with code 0"},
		{name: "exit 3 fails with its code", script: "exit 3", state: structs.AllocFailed, code: 3, reason: "exited with code 3"},
		{name: "death by signal is 128+N", script: "kill -SEGV $$", state: structs.AllocFailed, code: 128 + 11,
			reason: "killed by signal SIGSEGV"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := sh(tc.script)
			mustStart(t, r, tk)
			u := waitTerminal(t, rec, tk.Alloc.ID)
			if u.State != tc.state || u.ExitCode != tc.code || u.Reason != tc.reason {
				t.Errorf("got %s code %d %q, want %s code %d %q", u.State, u.ExitCode, u.Reason, tc.state, tc.code, tc.reason)
			}
			if n := rec.count(tk.Alloc.ID, structs.AllocRunning); n > 1 {
				t.Errorf("running reported %d times", n)
			}
			waitFor(t, 5*time.Second, "alloc untracked", func() (bool, string) {
				return !tracked(r, tk.Alloc.ID), strings.Join(r.Tracked(), ",")
			})
		})
	}
}

func TestRunner_ReportsRunningWithStartTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	tk := sh("until [ -e go ]; do sleep 0.02; done")
	tk.Job.Spec.Workdir = work
	before := time.Now()
	mustStart(t, r, tk)
	u := waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	if u.At.Before(before.Add(-time.Second)) || u.At.After(time.Now()) {
		t.Errorf("running at %v, want between %v and now", u.At, before)
	}
	if !tracked(r, tk.Alloc.ID) {
		t.Errorf("running alloc not tracked: %v", r.Tracked())
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Errorf("ended %+v", u)
	}
}

func TestRunner_StopSendsTermAndRespectsGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.grace = 20 * time.Second
	r, rec := e.runner(t)
	tk := sh(`trap 'echo got-term; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
	start := time.Now()
	r.Stop(tk.Alloc.ID, "cancelled by user")
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocKilled || u.ExitCode != 0 || u.Reason != "killed: cancelled by user" {
		t.Errorf("got %+v, want killed with the job's own exit code 0", u)
	}
	if took := time.Since(start); took > e.grace/2 {
		t.Errorf("stop took %s: TERM was not delivered, the job waited for KILL", took)
	}
	if out := readFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile)); !strings.Contains(out, "got-term") {
		t.Errorf("trap did not run; stdout %q", out)
	}
}

func TestRunner_StopKillsWholeGroupAfterGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.grace = 300 * time.Millisecond
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	// TERM is ignored by the script and by the grandchild it leaves behind.
	tk := sh(`trap '' TERM; sleep 1000 & echo $! > grandchild; echo ready; wait`)
	tk.Job.Spec.Workdir = work
	mustStart(t, r, tk)
	waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(work, "grandchild"))))
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := newProcRecord(pid, time.Now())
	if err != nil {
		t.Fatalf("grandchild not running: %v", err)
	}
	r.Stop(tk.Alloc.ID, "")
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocKilled || u.ExitCode != 128+9 || u.Reason != "killed: stop requested" {
		t.Errorf("got %+v, want killed by SIGKILL (137)", u)
	}
	var st status
	if _, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, statusFile), &st); err != nil || st.Signal != "SIGKILL" {
		t.Errorf("status.json signal = %q (%v), want SIGKILL", st.Signal, err)
	}
	waitFor(t, 5*time.Second, "grandchild to die", func() (bool, string) {
		return !grandchild.alive(), "grandchild pid " + strconv.Itoa(pid) + " alive"
	})
}

func TestRunner_TimeLimitEndsTheJobTimedOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.grace = 5 * time.Second
	r, rec := e.runner(t)
	tk := task("sleep", "30")
	tk.Job.Spec.TimeLimit = structs.Duration(300 * time.Millisecond)
	mustStart(t, r, tk)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	want := structs.AllocUpdate{AllocID: tk.Alloc.ID, State: structs.AllocTimedOut, ExitCode: 128 + 15,
		Reason: "time limit 300ms exceeded", At: u.At, Usage: u.Usage}
	if u != want {
		t.Errorf("got %+v, want %+v", u, want)
	}
}

// trapScript is a job whose shell and background child each append a line
// to $1 when they get SIGUSR1, and which would run for 30s.
const trapScript = `out=$1
trap 'echo parent >> "$out"' USR1
sh -c 'trap "echo child >> \"$0\"" USR1; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done' "$out" &
echo "limit=$SKEIN_TIME_LIMIT signal=$SKEIN_TIME_SIGNAL"
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done`

func TestRunner_SignalBeforeTheLimitReachesTheWholeGroupOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	out := filepath.Join(testutil.SharedDir(t), "signals")
	tk := task("/bin/sh", "-c", trapScript, "job", out)
	tk.Job.Spec.TimeLimit = structs.Duration(2 * time.Second)
	tk.Job.Spec.Signal = &structs.TimeSignal{Name: "USR1", Before: structs.Duration(1500 * time.Millisecond)}
	mustStart(t, r, tk)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocTimedOut {
		t.Fatalf("got %+v, want timed out", u)
	}
	lines := strings.Fields(readFile(t, out))
	slices.Sort(lines)
	if !slices.Equal(lines, []string{"child", "parent"}) {
		t.Errorf("signal file holds %q, want one line from the job and one from its child", lines)
	}
	if got := readFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile)); got != "limit=2 signal=USR1@1.5s\n" {
		t.Errorf("job printed %q", got)
	}
	var st status
	if _, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, statusFile), &st); err != nil || st.SignalledAt.IsZero() {
		t.Errorf("status.json %+v (%v): want the signal's time recorded", st, err)
	}
	if d := st.FinishedAt.Sub(st.StartedAt); d < 2*time.Second {
		t.Errorf("the job ran %s, less than its 2s limit", d)
	}
}

// A supervisor keeps the job's deadline across an agent restart: the new
// runner adopts it and the job still ends at its first start plus the limit,
// signalled once.
func TestRunner_ReadoptedJobKeepsItsDeadlineAndSignalsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1, rec1 := e.runner(t)
	out := filepath.Join(testutil.SharedDir(t), "signals")
	tk := task("/bin/sh", "-c", trapScript, "job", out)
	tk.Job.Spec.TimeLimit = structs.Duration(2 * time.Second)
	tk.Job.Spec.Signal = &structs.TimeSignal{Name: "USR1", Before: structs.Duration(time.Second)}
	mustStart(t, r1, tk)
	first := waitState(t, rec1, tk.Alloc.ID, structs.AllocRunning)
	r1.Shutdown()

	r2, rec2 := e.runner(t)
	if _, err := r2.Restore(); err != nil {
		t.Fatal(err)
	}
	u := waitTerminal(t, rec2, tk.Alloc.ID)
	if u.State != structs.AllocTimedOut {
		t.Fatalf("got %+v, want timed out", u)
	}
	var st status
	if _, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, statusFile), &st); err != nil {
		t.Fatal(err)
	}
	if !st.StartedAt.Equal(first.At) {
		t.Errorf("status says the job started at %s, first report said %s", st.StartedAt, first.At)
	}
	if d := st.FinishedAt.Sub(st.StartedAt); d < 2*time.Second {
		t.Errorf("the job ran %s, less than its 2s limit", d)
	}
	if lines := strings.Fields(readFile(t, out)); len(lines) != 2 {
		t.Errorf("signal file holds %q, want the signal delivered once to each process", lines)
	}
}

func TestRunner_StartFailuresAreReportedWithoutShell(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	closed := filepath.Join(testutil.JobDir(t), "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	nobody := jobUser(t)
	cases := []struct {
		name    string
		argv    []string
		workdir string
		code    int
		reason  string
	}{
		{name: "missing binary", argv: []string{"pytohn", "train.py"}, code: 127,
			reason: `start failed: exec: "pytohn": executable file not found in $PATH`},
		{name: "missing workdir", argv: []string{"true"}, workdir: missing, code: 127,
			reason: "start failed: workdir " + missing + ": no such file or directory"},
		{name: "not executable", argv: []string{notExec}, code: 126,
			reason: "start failed: fork/exec " + notExec + ": permission denied"},
		{name: "workdir closed to the job's user", argv: []string{"true"}, workdir: closed, code: 127,
			reason: fmt.Sprintf("start failed: workdir %s: %s (uid %d) may not enter %s (mode 0700, owner uid 0)",
				closed, nobody.Name, nobody.UID, closed)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := task(tc.argv...)
			tk.Job.Spec.Workdir = tc.workdir
			mustStart(t, r, tk)
			u := waitTerminal(t, rec, tk.Alloc.ID)
			if u.State != structs.AllocFailed || u.ExitCode != tc.code || u.Reason != tc.reason {
				t.Errorf("got %s %d %q, want failed %d %q", u.State, u.ExitCode, u.Reason, tc.code, tc.reason)
			}
			if n := rec.count(tk.Alloc.ID, structs.AllocRunning); n != 0 {
				t.Errorf("a job that never started was reported running")
			}
		})
	}
}

func TestRunner_CapturesStdoutAndStderr(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh("echo to-out; echo to-err >&2")
	mustStart(t, r, tk)
	waitTerminal(t, rec, tk.Alloc.ID)
	for stream, want := range map[string]string{"stdout": "to-out\n", "stderr": "to-err\n"} {
		path, err := r.LogPath(tk.Alloc.ID, stream)
		if err != nil {
			t.Fatalf("LogPath(%s): %v", stream, err)
		}
		if got := readFile(t, path); got != want {
			t.Errorf("%s = %q, want %q", stream, got, want)
		}
	}
}

func TestRunner_LogPathErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.runner(t)
	cases := []struct {
		name, id, stream string
		want             error
	}{
		{name: "unknown stream", id: "a1", stream: "stdin", want: ErrUnknownStream},
		{name: "unknown allocation", id: "nosuchalloc", stream: "stdout", want: ErrNoLogs},
		{name: "path traversal", id: "../etc", stream: "stdout", want: ErrInvalidAllocID},
		{name: "empty id", id: "", stream: "stderr", want: ErrInvalidAllocID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.LogPath(tc.id, tc.stream); !errors.Is(err, tc.want) {
				t.Errorf("LogPath(%q, %q) = %v, want %v", tc.id, tc.stream, err, tc.want)
			}
		})
	}
}

func TestRunner_StartTwiceIsNoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	tk := sh("echo run; until [ -e go ]; do sleep 0.02; done")
	tk.Job.Spec.Workdir = work
	mustStart(t, r, tk)
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	mustStart(t, r, tk)
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, rec, tk.Alloc.ID)
	waitFor(t, 5*time.Second, "alloc untracked", func() (bool, string) {
		return !tracked(r, tk.Alloc.ID), strings.Join(r.Tracked(), ",")
	})
	// Once over, Start reports the recorded outcome again instead of rerunning.
	mustStart(t, r, tk)
	waitFor(t, 5*time.Second, "outcome reported again", func() (bool, string) {
		return rec.count(tk.Alloc.ID, structs.AllocSucceeded) == 2, rec.String()
	})
	if n := rec.count(tk.Alloc.ID, structs.AllocRunning); n != 1 {
		t.Errorf("running reported %d times, want 1", n)
	}
	if out := readFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile)); out != "run\n" {
		t.Errorf("stdout %q: the job ran more than once", out)
	}
}

func TestRunner_StartRejectsBadTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	bad := task()
	slash := task("true")
	slash.Alloc.ID = "../escape"
	cases := []struct {
		name string
		tk   Task
		want error
	}{
		{name: "empty command", tk: bad, want: ErrNoCommand},
		{name: "id with a slash", tk: slash, want: ErrInvalidAllocID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := r.Start(tc.tk); !errors.Is(err, tc.want) {
				t.Errorf("Start = %v, want %v", err, tc.want)
			}
		})
	}
	if len(r.Tracked()) != 0 || rec.String() != "[]" {
		t.Errorf("rejected tasks left traces: tracked %v, reports %s", r.Tracked(), rec)
	}
}

func TestRunner_StopUnknownAllocIsNoop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	r.Stop("nosuchalloc", "bye")
	r.Stop("../x", "bye")
	if _, err := os.Stat(filepath.Join(e.allocDir, "nosuchalloc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Stop of an unknown alloc created its directory: %v", err)
	}
	if rec.String() != "[]" {
		t.Errorf("Stop of an unknown alloc reported %s", rec)
	}
}

func TestRunner_ForgetRefusesLiveAndRemovesFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	tk := sh("until [ -e go ]; do sleep 0.02; done")
	tk.Job.Spec.Workdir = work
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	if err := r.Forget(tk.Alloc.ID); !errors.Is(err, ErrStillRunning) {
		t.Fatalf("Forget of a running alloc = %v, want ErrStillRunning", err)
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, rec, tk.Alloc.ID)
	waitFor(t, 5*time.Second, "Forget to succeed", func() (bool, string) {
		err := r.Forget(tk.Alloc.ID)
		return err == nil, "Forget: " + errString(err)
	})
	if _, err := os.Stat(filepath.Join(e.allocDir, tk.Alloc.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("alloc dir still there: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestRunner_ShutdownRefusesNewWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.runner(t)
	r.Shutdown()
	r.Shutdown()
	if err := r.Start(task("true")); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Shutdown = %v, want ErrClosed", err)
	}
	if _, err := r.Restore(); !errors.Is(err, ErrClosed) {
		t.Errorf("Restore after Shutdown = %v", err)
	}
}

// pidOf reads a process record from an allocation directory.
func pidOf(t *testing.T, dir, name string) procRecord {
	t.Helper()
	var p procRecord
	if found, err := readJSON(filepath.Join(dir, name), &p); !found || err != nil {
		t.Fatalf("read %s: found %v, %v", name, found, err)
	}
	return p
}

func TestRunner_RestartReadoptsRunningJobAndKeepsExitCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1, rec1 := e.runner(t)
	work := testutil.SharedDir(t)
	tk := sh("until [ -e go ]; do sleep 0.02; done; exit 7")
	tk.Job.Spec.Workdir = work
	mustStart(t, r1, tk)
	waitState(t, rec1, tk.Alloc.ID, structs.AllocRunning)
	r1.Shutdown()

	job := pidOf(t, filepath.Join(e.allocDir, tk.Alloc.ID), jobPIDFile)
	if !job.alive() {
		t.Fatal("job died with the runner")
	}
	r2, rec2 := e.runner(t)
	adopted, err := r2.Restore()
	if err != nil {
		t.Fatal(err)
	}
	if len(adopted) != 1 || adopted[0] != tk.Alloc.ID || !tracked(r2, tk.Alloc.ID) {
		t.Fatalf("adopted %v, tracked %v; want [%s]", adopted, r2.Tracked(), tk.Alloc.ID)
	}
	waitState(t, rec2, tk.Alloc.ID, structs.AllocRunning)
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	u := waitTerminal(t, rec2, tk.Alloc.ID)
	if u.State != structs.AllocFailed || u.ExitCode != 7 || u.Reason != "exited with code 7" {
		t.Errorf("got %+v, want failed with exit code 7", u)
	}
	if ups := rec1.of(tk.Alloc.ID); len(ups) != 1 {
		t.Errorf("the shut down runner reported after Shutdown: %+v", ups)
	}
}

func TestRunner_RestoredJobCanBeStopped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1, rec1 := e.runner(t)
	tk := sh("while :; do sleep 0.05; done")
	mustStart(t, r1, tk)
	waitState(t, rec1, tk.Alloc.ID, structs.AllocRunning)
	r1.Shutdown()

	r2, rec2 := e.runner(t)
	if _, err := r2.Restore(); err != nil {
		t.Fatal(err)
	}
	r2.Stop(tk.Alloc.ID, "node drained")
	u := waitTerminal(t, rec2, tk.Alloc.ID)
	if u.State != structs.AllocKilled || u.Reason != "killed: node drained" || u.ExitCode != 128+15 {
		t.Errorf("got %+v, want killed by SIGTERM", u)
	}
}

func TestRunner_RestartReportsJobThatEndedWhileDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1, rec1 := e.runner(t)
	work := testutil.SharedDir(t)
	tk := sh("until [ -e go ]; do sleep 0.02; done; exit 5")
	tk.Job.Spec.Workdir = work
	mustStart(t, r1, tk)
	waitState(t, rec1, tk.Alloc.ID, structs.AllocRunning)
	r1.Shutdown()
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	waitFor(t, 10*time.Second, "supervisor to finish", func() (bool, string) {
		held, err := lockHeld(dir)
		return !held && err == nil, "lock held"
	})

	r2, rec2 := e.runner(t)
	adopted, err := r2.Restore()
	if err != nil || len(adopted) != 0 {
		t.Fatalf("Restore = %v, %v; want nothing adopted", adopted, err)
	}
	u := waitTerminal(t, rec2, tk.Alloc.ID)
	if u.State != structs.AllocFailed || u.ExitCode != 5 {
		t.Errorf("got %+v, want failed with exit code 5", u)
	}
	if len(r2.Tracked()) != 0 {
		t.Errorf("finished alloc tracked: %v", r2.Tracked())
	}
}

func TestRunner_RestartReportsLostSupervisorAndKillsItsJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1, rec1 := e.runner(t)
	tk := sh("while :; do sleep 0.05; done")
	mustStart(t, r1, tk)
	waitState(t, rec1, tk.Alloc.ID, structs.AllocRunning)
	r1.Shutdown()
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	sup := pidOf(t, dir, supervisorPIDFile)
	job := pidOf(t, dir, jobPIDFile)
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "supervisor to die", func() (bool, string) {
		held, err := lockHeld(dir)
		return !held && err == nil, "lock held"
	})
	if !job.alive() {
		t.Fatal("job died with its supervisor; the test cannot show it is cleaned up")
	}

	r2, rec2 := e.runner(t)
	if _, err := r2.Restore(); err != nil {
		t.Fatal(err)
	}
	u := waitTerminal(t, rec2, tk.Alloc.ID)
	if u.State != structs.AllocLost || u.Reason != lostReason || u.ExitCode != exitUnknown {
		t.Errorf("got %+v, want lost: %s", u, lostReason)
	}
	waitFor(t, 5*time.Second, "orphaned job to be killed", func() (bool, string) {
		return !job.alive(), "job alive"
	})
	// The verdict is recorded, so the next restart tells the same story.
	var st status
	if found, err := readJSON(filepath.Join(dir, statusFile), &st); !found || err != nil || st.Reason != lostReason {
		t.Errorf("status.json = %+v (found %v, %v)", st, found, err)
	}
}

func TestRunner_StopRightAfterStartEndsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	for range 5 {
		tk := task("sleep", "30")
		mustStart(t, r, tk)
		r.Stop(tk.Alloc.ID, "changed my mind")
		u := waitTerminal(t, rec, tk.Alloc.ID)
		// Stopped before the job started (no exit code) or right after (SIGTERM).
		if u.State != structs.AllocKilled || u.Reason != "killed: changed my mind" ||
			(u.ExitCode != exitUnknown && u.ExitCode != 128+15) {
			t.Errorf("got %+v, want killed: changed my mind", u)
		}
	}
}

// TestRunner_StopWithinShortensTheGrace: a fencing stop may not wait for the
// job's long kill grace; a job that ignores TERM is still killed.
func TestRunner_StopWithinShortensTheGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.grace = time.Hour
	r, rec := e.runner(t)
	tk := sh(`trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
	r.StopWithin(tk.Alloc.ID, "lost contact with the leader", 200*time.Millisecond)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocKilled || u.ExitCode != 128+9 || u.Reason != "killed: lost contact with the leader" {
		t.Errorf("got %+v, want killed by SIGKILL well before the hour-long grace", u)
	}
}

// TestRunner_StopAfterGivesALongerGraceThanTheNodes: a preempted job gets
// its own warning time even when the node's kill grace is shorter, so it
// can finish its checkpoint after SIGTERM.
func TestRunner_StopAfterGivesALongerGraceThanTheNodes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.grace = 100 * time.Millisecond
	r, rec := e.runner(t)
	tk := sh(`trap 'sleep 0.5; echo saved; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
	r.StopAfter(tk.Alloc.ID, "preempted by job x (priority 5)", time.Minute)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocKilled || u.ExitCode != 0 || u.Reason != "killed: preempted by job x (priority 5)" {
		t.Errorf("got %+v, want killed with the job's own exit code 0 after its checkpoint", u)
	}
	if out := readFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile)); !strings.Contains(out, "saved") {
		t.Errorf("the job did not finish its TERM handler; stdout %q", out)
	}
}

func TestRunner_SweepRemovesOnlyFinishedAllocationsTheStateDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	withIndex := func(tk Task, index uint64) Task {
		tk.Alloc.CreateIndex = index
		return tk
	}
	dropped := withIndex(sh("true"), 10)    // over, gone from the state: removed
	stillHeld := withIndex(sh("true"), 11)  // over, the state still holds it
	notReached := withIndex(sh("true"), 50) // over, created after the index the state has applied
	legacy := withIndex(sh("true"), 0)      // over, its spec records no index
	running := withIndex(sh("until [ -e go ]; do sleep 0.02; done"), 12)
	running.Job.Spec.Workdir = work
	for _, tk := range []Task{dropped, stillHeld, notReached, legacy, running} {
		mustStart(t, r, tk)
	}
	for _, tk := range []Task{dropped, stillHeld, notReached, legacy} {
		waitTerminal(t, rec, tk.Alloc.ID)
	}
	waitState(t, rec, running.Alloc.ID, structs.AllocRunning)
	held := func(id string) bool { return id == stillHeld.Alloc.ID }
	exists := func(tk Task) bool {
		_, err := os.Stat(filepath.Join(e.allocDir, tk.Alloc.ID))
		return err == nil
	}
	// The runner lets go of an allocation a moment after its report.
	waitFor(t, 5*time.Second, "the dropped allocation's directory to go", func() (bool, string) {
		n, err := r.Sweep(held, 20)
		return !exists(dropped), fmt.Sprintf("swept %d, error %v", n, err)
	})
	for _, tk := range []Task{stillHeld, notReached, legacy, running} {
		if !exists(tk) {
			t.Errorf("the directory of %s was removed", tk.Alloc.ID)
		}
	}
	if n, err := r.Sweep(func(string) bool { return false }, 20); err != nil || n != 1 || !exists(running) {
		t.Fatalf("a sweep with every allocation dropped removed %d (%v); want only the one held before, never the running one", n, err)
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitTerminal(t, rec, running.Alloc.ID)
}

// TestRunner_AJobThatEndedBetweenTwoLooksIsReportedRunningFirst: a job
// may start and end between two looks at its directory (its supervisor
// wrote job.pid, then status.json, and exited); it ran all the same, and
// the cluster learns it did (its start time, the submit-to-running
// metric) before it learns how it ended.
func TestRunner_AJobThatEndedBetweenTwoLooksIsReportedRunningFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	a := &alloc{id: "quick", dir: filepath.Join(e.allocDir, "quick")}
	if err := os.Mkdir(a.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	if err := writeJSONAtomic(filepath.Join(a.dir, jobPIDFile), jobRecord{PID: 1, StartedAt: started}); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(a.dir, statusFile), status{State: structs.AllocSucceeded, FinishedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if over := r.check(a, &watchState{}); !over {
		t.Fatal("check of an allocation with its status written: not over")
	}
	ups := rec.of(a.id)
	if len(ups) != 2 || ups[0].State != structs.AllocRunning || !ups[0].At.Equal(started) || ups[1].State != structs.AllocSucceeded {
		t.Fatalf("reports %v; want running at %s, then succeeded", ups, started)
	}
}
