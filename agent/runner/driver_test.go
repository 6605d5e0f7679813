package runner

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// supervisorProc is a supervisor a test started itself, without a runner,
// on an allocation directory it prepared.
type supervisorProc struct {
	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed once the supervisor has exited
}

// startSupervisor runs the test binary as the supervisor of dir; it is
// killed at cleanup if it still runs.
func startSupervisor(t *testing.T, dir string) *supervisorProc {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, supervisorLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], dir)
	cmd.Env = append(os.Environ(), superviseEnv+"=1")
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start supervisor: %v", err)
	}
	p := &supervisorProc{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit code is in cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// exitCode waits for the supervisor to exit and returns its exit code.
func (p *supervisorProc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(10 * time.Second):
		log, _ := os.ReadFile(filepath.Join(p.dir, supervisorLogFile))
		t.Fatalf("supervisor still runs after 10s; its log:\n%s", log)
		return 0
	}
}

// waitJobStarted waits for the supervisor to record the job in job.pid.
func waitJobStarted(t *testing.T, dir string) {
	t.Helper()
	waitFor(t, 10*time.Second, "job.pid", func() (bool, string) {
		_, err := os.Stat(filepath.Join(dir, jobPIDFile))
		return err == nil, errString(err)
	})
}

// newAllocDir makes an allocation directory holding spec.json as the
// runner would write it, and returns it.
func newAllocDir(t *testing.T, e *testEnv, sp spec) string {
	t.Helper()
	sp.AllocID = newAllocID()
	dir := filepath.Join(e.allocDir, sp.AllocID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(dir, specFile), sp); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeSpecWithoutDriver rewrites spec.json as an agent from before specs
// named their driver wrote it.
func writeSpecWithoutDriver(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, specFile))
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	delete(fields, "driver")
	if err := writeJSONAtomic(filepath.Join(dir, specFile), fields); err != nil {
		t.Fatal(err)
	}
}

func readStatus(t *testing.T, dir string) status {
	t.Helper()
	var st status
	if found, err := readJSON(filepath.Join(dir, statusFile), &st); !found || err != nil {
		t.Fatalf("read status.json: found %v, %v", found, err)
	}
	return st
}

func TestRunner_SpecNamesTheProcessDriver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := task("true")
	mustStart(t, r, tk)
	waitTerminal(t, rec, tk.Alloc.ID)
	var sp spec
	if _, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, specFile), &sp); err != nil || sp.Driver != "process" {
		t.Errorf("spec.json driver = %q (%v), want process", sp.Driver, err)
	}
}

func TestSupervisor_UnknownDriverFailsTheStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := newAllocDir(t, e, spec{Driver: "warp", Argv: []string{"true"}})
	if code := startSupervisor(t, dir).exitCode(t); code != 0 {
		t.Fatalf("supervisor exited %d, want 0 with the outcome recorded", code)
	}
	const reason = `start failed: unknown driver "warp"`
	st := readStatus(t, dir)
	if st.State != structs.AllocFailed || st.ExitCode != exitNotFound || st.Reason != reason {
		t.Errorf("status = %+v, want failed, exit code 127, %q", st, reason)
	}
	if _, err := os.Stat(filepath.Join(dir, jobPIDFile)); err == nil {
		t.Error("job.pid written for a job no driver could start")
	}

	r, rec := e.runner(t)
	if _, err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, filepath.Base(dir)); u.State != structs.AllocFailed || u.Reason != reason {
		t.Errorf("reported %+v, want failed: %s", u, reason)
	}
}

func TestSupervisor_SpecWithoutDriverRunsAProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := newAllocDir(t, e, spec{Argv: []string{"/bin/sh", "-c", "echo old; exit 4"}, User: jobUser(t),
		Workdir: testutil.JobDir(t), KillGrace: structs.Duration(time.Second)})
	writeSpecWithoutDriver(t, dir)
	if code := startSupervisor(t, dir).exitCode(t); code != 0 {
		t.Fatalf("supervisor exited %d", code)
	}
	if st := readStatus(t, dir); st.State != structs.AllocFailed || st.ExitCode != 4 || st.Reason != "exited with code 4" {
		t.Errorf("status = %+v, want the process's exit code 4", st)
	}
	if out := readFile(t, filepath.Join(dir, stdoutFile)); out != "old\n" {
		t.Errorf("stdout %q, want the process's output", out)
	}
	var job jobRecord
	if _, err := readJSON(filepath.Join(dir, jobPIDFile), &job); err != nil || job.PID <= 0 || job.PGID != job.PID {
		t.Errorf("job.pid = %+v (%v), want a process leading its own group", job, err)
	}
}

// TestRunner_OrphanOfSpecWithoutDriverIsKilledAsAProcess: a job started by
// an older agent, whose spec names no driver, is cleaned up as a process
// group when its supervisor dies.
func TestRunner_OrphanOfSpecWithoutDriverIsKilledAsAProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := newAllocDir(t, e, spec{Argv: []string{"/bin/sh", "-c", "while :; do sleep 0.05; done"}, User: jobUser(t),
		Env: []string{"PATH=" + JobPath}, Workdir: testutil.JobDir(t), KillGrace: structs.Duration(time.Second)})
	writeSpecWithoutDriver(t, dir)
	sup := startSupervisor(t, dir)
	waitJobStarted(t, dir)
	job := pidOf(t, dir, jobPIDFile)
	if err := sup.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sup.exitCode(t)
	if !job.alive() {
		t.Fatal("job died with its supervisor; the test cannot show it is cleaned up")
	}

	r, rec := e.runner(t)
	if _, err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, filepath.Base(dir)); u.State != structs.AllocLost {
		t.Errorf("reported %+v, want lost", u)
	}
	waitFor(t, 5*time.Second, "orphaned job to be killed", func() (bool, string) {
		return !job.alive(), "job alive"
	})
}

// TestRunner_OrphanIsKilledThroughItsSpecsDriver: the runner cleans up
// after a dead supervisor with the driver spec.json names.
func TestRunner_OrphanIsKilledThroughItsSpecsDriver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	work := t.TempDir()
	dir := newAllocDir(t, e, spec{Driver: fakeDriverName, Argv: []string{fakeUntilKill},
		Workdir: work, KillGrace: structs.Duration(time.Hour)})
	sup := startSupervisor(t, dir)
	waitJobStarted(t, dir)
	if err := sup.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sup.exitCode(t)

	r, rec := e.runner(t)
	if _, err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, filepath.Base(dir)); u.State != structs.AllocLost || u.Reason != lostReason {
		t.Errorf("reported %+v, want lost", u)
	}
	var job jobRecord
	if _, err := readJSON(filepath.Join(dir, jobPIDFile), &job); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(work, orphanMarker)); got != job.StartedAt.Format(time.RFC3339Nano) {
		t.Errorf("the fake driver was asked to kill the job started at %q, want %s", got, job.StartedAt)
	}
}

// TestSupervisor_JobEndsAsItsDriverSays: the exit a driver reports, or its
// start failure and exit code, decide the outcome.
func TestSupervisor_JobEndsAsItsDriverSays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cases := []struct {
		name   string
		mode   string
		state  structs.AllocState
		code   int
		reason string
	}{
		{name: "exit 0 succeeds", mode: fakeExitPrefix + "0", state: structs.AllocSucceeded, code: 0,
			reason: "exited with code 0"},
		{name: "exit 3 fails with its code", mode: fakeExitPrefix + "3", state: structs.AllocFailed, code: 3,
			reason: "exited with code 3"},
		{name: "a start failure keeps the driver's code", mode: fakeCannotStart, state: structs.AllocFailed,
			code: exitCannotExec, reason: "start failed: fake: cannot start"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := newAllocDir(t, e, spec{Driver: fakeDriverName, Argv: []string{tc.mode},
				KillGrace: structs.Duration(time.Hour)})
			if code := startSupervisor(t, dir).exitCode(t); code != 0 {
				t.Fatalf("supervisor exited %d", code)
			}
			if st := readStatus(t, dir); st.State != tc.state || st.ExitCode != tc.code || st.Reason != tc.reason {
				t.Errorf("status = %+v, want %s, exit code %d, %q", st, tc.state, tc.code, tc.reason)
			}
		})
	}
}

// TestSupervisor_StopsReachTheJobThroughItsHandle: the time limit and its
// signal, stop requests and their grace, and an expired lease are the
// supervisor's; they reach a job of any driver as signals through its
// handle, and the outcome is recorded.
func TestSupervisor_StopsReachTheJobThroughItsHandle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expired := filepath.Join(t.TempDir(), "lease.json")
	if err := writeJSONAtomic(expired, lease{ExpiresAt: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	// stop asks the supervisor to stop the job, as Runner.Stop does.
	stop := func(req stopRequest) func(*testing.T, *supervisorProc) {
		return func(t *testing.T, p *supervisorProc) {
			waitJobStarted(t, p.dir)
			if err := writeJSONAtomic(filepath.Join(p.dir, stopFile), req); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name    string
		sp      spec
		act     func(*testing.T, *supervisorProc)
		state   structs.AllocState
		signal  string // the signal the job ended by
		reason  string
		signals string // every signal the job got, in order
	}{
		{
			name: "time limit with its signal before",
			sp: spec{Argv: []string{fakeUntilKill}, TimeLimit: structs.Duration(300 * time.Millisecond),
				Signal: "USR1", SignalBefore: structs.Duration(200 * time.Millisecond),
				KillGrace: structs.Duration(100 * time.Millisecond)},
			state: structs.AllocTimedOut, signal: "SIGKILL", reason: "time limit 300ms exceeded",
			signals: "SIGUSR1\nSIGTERM\nSIGKILL\n",
		},
		{
			name:  "stop request ends a job that heeds TERM",
			sp:    spec{Argv: []string{fakeUntilTerm}, KillGrace: structs.Duration(time.Hour)},
			act:   stop(stopRequest{Reason: "cancelled by user"}),
			state: structs.AllocKilled, signal: "SIGTERM", reason: "killed: cancelled by user",
			signals: "SIGTERM\n",
		},
		{
			name: "stop request with a shorter grace kills a job that ignores TERM",
			sp:   spec{Argv: []string{fakeUntilKill}, KillGrace: structs.Duration(time.Hour)},
			act: stop(stopRequest{Reason: "lost contact with the leader",
				Grace: structs.Duration(100 * time.Millisecond)}),
			state: structs.AllocKilled, signal: "SIGKILL", reason: "killed: lost contact with the leader",
			signals: "SIGTERM\nSIGKILL\n",
		},
		{
			name: "expired lease fences",
			sp: spec{Argv: []string{fakeUntilKill}, KillGrace: structs.Duration(time.Hour),
				LeasePath: expired, FenceGrace: structs.Duration(100 * time.Millisecond)},
			state: structs.AllocKilled, signal: "SIGKILL", reason: "killed: " + fencedReason,
			signals: "SIGTERM\nSIGKILL\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.sp.Driver = fakeDriverName
			dir := newAllocDir(t, e, tc.sp)
			p := startSupervisor(t, dir)
			if tc.act != nil {
				tc.act(t, p)
			}
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("supervisor exited %d", code)
			}
			st := readStatus(t, dir)
			if st.State != tc.state || st.Signal != tc.signal || st.Reason != tc.reason {
				t.Errorf("status = %+v, want %s by %s, %q", st, tc.state, tc.signal, tc.reason)
			}
			if got := readFile(t, filepath.Join(dir, stdoutFile)); got != tc.signals {
				t.Errorf("the job got signals %q, want %q", got, tc.signals)
			}
			var job jobRecord
			if _, err := readJSON(filepath.Join(dir, jobPIDFile), &job); err != nil || !st.StartedAt.Equal(job.StartedAt) {
				t.Errorf("status started at %s, job.pid says %s (%v)", st.StartedAt, job.StartedAt, err)
			}
			if wantSignalled := tc.sp.Signal != ""; st.SignalledAt.IsZero() == wantSignalled {
				t.Errorf("signalled at %v, want the time-limit signal's time recorded only when it went out", st.SignalledAt)
			}
		})
	}
}
