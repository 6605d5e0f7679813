package runner

import (
	"context"
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

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// Tests of the container driver on the real engine, with the busybox test
// image (testutil.BusyboxImage); they skip where no engine answers.

// containerEnv is a test environment whose runners run image tasks on
// the engine.
type containerEnv struct {
	*testEnv
	image string
	d     *engine.Docker
}

// newContainerEnv is newEnv for image tasks; every container labelled
// with its allocation directory is removed at cleanup.
func newContainerEnv(t *testing.T) *containerEnv {
	t.Helper()
	image := testutil.BusyboxImage(t)
	e := &containerEnv{testEnv: newEnv(t), image: image}
	var err error
	if e.d, err = engine.NewDocker(engine.DefaultSocket); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer e.d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := e.d.List(ctx, engine.LabelAllocDir, e.allocDir)
		if err != nil {
			t.Errorf("list the test's containers: %v", err)
		}
		for _, c := range list {
			if err := e.d.Remove(ctx, c.ID); err != nil {
				t.Errorf("remove the test's container %s: %v", c.Name, err)
			}
		}
	})
	return e
}

// runner is testEnv.runner with the engine at its default socket.
func (e *containerEnv) runner(t *testing.T, opts ...func(*Config)) (*Runner, *recorder) {
	t.Helper()
	withEngine := func(c *Config) { c.ContainerSocket = engine.DefaultSocket }
	return e.testEnv.runner(t, append([]func(*Config){withEngine}, opts...)...)
}

// sh is a task running a shell script in the test image.
func (e *containerEnv) sh(script string) Task { return imageTask(e.image, "sh", "-c", script) }

// container creates a container of the test image that sleeps, labelled
// as given, started when start is set, and removed at cleanup.
func (e *containerEnv) container(t *testing.T, name string, labels map[string]string, start bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := e.d.Create(ctx, engine.ContainerSpec{Name: name, Labels: labels, Image: e.image,
		Cmd: []string{"sleep", "3600"}})
	if err != nil {
		t.Fatalf("create container %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.d.Remove(context.Background(), id) })
	if start {
		if err := e.d.Start(ctx, id); err != nil {
			t.Fatalf("start container %s: %v", name, err)
		}
	}
	return id
}

// inspect returns what the engine says of a container; found is false
// when there is no such container.
func (e *containerEnv) inspect(t *testing.T, ref string) (engine.ContainerState, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := e.d.Inspect(ctx, ref)
	if errors.Is(err, engine.ErrNoContainer) {
		return st, false
	}
	if err != nil {
		t.Fatalf("inspect container %s: %v", ref, err)
	}
	return st, true
}

// requireGone fails the test when the container still exists.
func (e *containerEnv) requireGone(t *testing.T, ref, why string) {
	t.Helper()
	if st, found := e.inspect(t, ref); found {
		t.Errorf("container %s is still there (%+v): %s", ref, st, why)
	}
}

// jobOf reads an allocation's job.pid.
func jobOf(t *testing.T, dir string) jobRecord {
	t.Helper()
	var job jobRecord
	if found, err := readJSON(filepath.Join(dir, jobPIDFile), &job); !found || err != nil {
		t.Fatalf("read job.pid: found %v, %v", found, err)
	}
	return job
}

func TestContainer_JobRunsWithItsOutputAndExitCode(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh(`echo "out $CUDA_VISIBLE_DEVICES"; echo err >&2; pwd; exit 3`)
	tk.Alloc.GPUs = []string{"GPU-1111", "GPU-2222"} // simulated: no devices, the same variables
	mustStart(t, r, tk)
	running := waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocFailed || u.ExitCode != 3 || u.Reason != "exited with code 3" {
		t.Errorf("ended %+v, want failed with the job's code 3", u)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	if out := readFile(t, filepath.Join(dir, stdoutFile)); out != "out GPU-1111,GPU-2222\n/tmp\n" {
		t.Errorf("stdout %q, want the job's output in the image's workdir", out)
	}
	if out := readFile(t, filepath.Join(dir, stderrFile)); out != "err\n" {
		t.Errorf("stderr %q", out)
	}
	job := jobOf(t, dir)
	if job.ContainerID == "" || job.ContainerName != "skein-"+tk.Alloc.ID || !job.StartedAt.Equal(running.At) {
		t.Errorf("job.pid = %+v, want the container's ID and name, started when reported running (%s)", job, running.At)
	}
	e.requireGone(t, job.ContainerID, "removed before the outcome was recorded")
}

func TestContainer_StopSendsTermAndKillsAfterTheGrace(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	e.grace = 2 * time.Second
	r, rec := e.runner(t)
	cases := []struct {
		name   string
		script string
		code   int
		signal string
	}{
		{name: "a job trapping TERM exits with its code",
			script: `trap 'echo term; exit 7' TERM; echo ready; while :; do sleep 0.05; done`, code: 7},
		{name: "a job ignoring TERM is killed after the grace",
			script: `trap '' TERM; echo ready; while :; do sleep 0.05; done`, code: 128 + 9, signal: "SIGKILL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := e.sh(tc.script)
			mustStart(t, r, tk)
			dir := filepath.Join(e.allocDir, tk.Alloc.ID)
			waitFile(t, filepath.Join(dir, stdoutFile), "ready")
			r.Stop(tk.Alloc.ID, "cancelled by user")
			u := waitTerminal(t, rec, tk.Alloc.ID)
			if u.State != structs.AllocKilled || u.Reason != "killed: cancelled by user" || u.ExitCode != tc.code {
				t.Errorf("ended %+v, want killed with exit code %d", u, tc.code)
			}
			if st := readStatus(t, dir); st.Signal != tc.signal {
				t.Errorf("status = %+v, want signal %q", st, tc.signal)
			}
			e.requireGone(t, jobOf(t, dir).ContainerID, "a stopped job's container goes")
		})
	}
}

func TestContainer_TimeLimitSignalReachesTheMainProcess(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh(`trap 'echo usr1' USR1; trap 'echo term; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	tk.Job.Spec.TimeLimit = structs.Duration(8 * time.Second)
	tk.Job.Spec.Signal = &structs.TimeSignal{Name: "USR1", Before: structs.Duration(5 * time.Second)}
	mustStart(t, r, tk)
	u := waitTerminalWithin(t, rec, tk.Alloc.ID, 30*time.Second)
	if u.State != structs.AllocTimedOut || u.Reason != "time limit 8s exceeded" {
		t.Errorf("ended %+v, want timed out", u)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	if out := readFile(t, filepath.Join(dir, stdoutFile)); out != "ready\nusr1\nterm\n" {
		t.Errorf("stdout %q, want USR1 then TERM to reach the job", out)
	}
	if st := readStatus(t, dir); st.SignalledAt.IsZero() {
		t.Errorf("status = %+v, want the time-limit signal recorded", st)
	}
}

// waitTerminalWithin is waitTerminal with its own deadline.
func waitTerminalWithin(t *testing.T, rec *recorder, id string, timeout time.Duration) structs.AllocUpdate {
	t.Helper()
	var got structs.AllocUpdate
	waitFor(t, timeout, id+" to end", func() (bool, string) {
		for _, u := range rec.of(id) {
			if u.State.Terminal() {
				got = u
				return true, ""
			}
		}
		return false, rec.String()
	})
	return got
}

// TestContainer_JobRunsAsItsAccountWithTheImagesPathAndHome: the job runs
// as its account's uid and gid, which the image need not know, with the
// image's PATH, HOME and working directory unless the job names one.
func TestContainer_JobRunsAsItsAccountWithTheImagesPathAndHome(t *testing.T) {
	t.Parallel()
	alice := testutil.LocalUser(t)
	nobody := jobUser(t)
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	cases := []struct {
		name      string
		owner     string
		workdir   string
		uid, gid  int
		user      string
		home, pwd string
	}{
		{name: "an owner with a local account the image does not know", owner: alice.Name,
			uid: alice.UID, gid: alice.GID, user: alice.Name, home: "/", pwd: "/tmp"},
		{name: "the job user, whom the image knows", uid: int(nobody.UID), gid: int(nobody.GID), user: nobody.Name,
			home: "/nonexistent", pwd: "/tmp"},
		{name: "the job's own workdir", workdir: "/", uid: int(nobody.UID), gid: int(nobody.GID), user: nobody.Name,
			home: "/nonexistent", pwd: "/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := e.sh(`id -u; id -g; echo "$USER $PATH $HOME"; pwd`)
			tk.Job.Owner = tc.owner
			tk.Job.Spec.Workdir = tc.workdir
			out := stdoutOf(t, r, rec, e.allocDir, tk)
			want := strconv.Itoa(tc.uid) + "\n" + strconv.Itoa(tc.gid) + "\n" + tc.user + " " + testutil.ImagePATH + " " + tc.home + "\n" + tc.pwd + "\n"
			if out != want {
				t.Errorf("job printed %q, want %q", out, want)
			}
		})
	}
}

func TestContainer_MountsUnderTheAllowedDirectories(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	ro, rw := testutil.JobDir(t), testutil.SharedDir(t)
	if err := os.Chmod(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "f"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, rec := e.runner(t, func(c *Config) { c.AllowMounts = []string{ro, rw} })

	tk := e.sh(`cat /ro/f; if touch /ro/x 2>/dev/null; then echo ro-written; else echo ro-refused; fi; echo written >/rw/out`)
	tk.Job.Spec.Mounts = []structs.Mount{{Source: ro, Target: "/ro", ReadOnly: true}, {Source: rw, Target: "/rw"}}
	if out := stdoutOf(t, r, rec, e.allocDir, tk); out != "hello\nro-refused\n" {
		t.Errorf("job printed %q, want the read-only mount read and not written", out)
	}
	if got := readFile(t, filepath.Join(rw, "out")); got != "written\n" {
		t.Errorf("the read-write mount holds %q", got)
	}
	if _, err := os.Stat(filepath.Join(ro, "x")); err == nil {
		t.Error("the job wrote into its read-only mount")
	}

	outside := e.sh("true")
	outside.Job.Spec.Mounts = []structs.Mount{{Source: "/etc", Target: "/etc"}}
	if err := r.Start(outside); !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), "/etc:/etc") {
		t.Errorf("Start with a mount outside the allowed directories = %v, want %v", err, ErrMountRefused)
	}
}

func TestContainer_PullPolicies(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	const missing = "skein-test-missing:nope"
	// No registry listens there: a pull fails at once.
	const unpullable = "127.0.0.1:9/skein-test/missing:nope"
	for _, ref := range []string{missing, unpullable} {
		if has, err := e.d.HasImage(context.Background(), ref); err != nil || has {
			t.Fatalf("the engine holds %s (%v): the test needs it missing", ref, err)
		}
	}
	r, rec := e.runner(t)
	cases := []struct {
		name   string
		image  string
		pull   structs.PullPolicy
		state  structs.AllocState
		reason string   // its start
		why    []string // parts of it; none: the reason is all of it
		pulled bool     // pull.json written
	}{
		{name: "never, with the image missing, fails in words", image: missing, pull: structs.PullNever,
			state: structs.AllocFailed, reason: "start failed: image " + missing + " is not on this node and --image-pull is never"},
		{name: "if-not-present, with the image here, starts without pulling", image: e.image, pull: structs.PullIfNotPresent,
			state: structs.AllocSucceeded, reason: "exited with code 0"},
		{name: "the default is if-not-present", image: e.image, state: structs.AllocSucceeded, reason: "exited with code 0"},
		{name: "if-not-present, with the image missing, fails with the engine's reason", image: unpullable,
			pull: structs.PullIfNotPresent, state: structs.AllocFailed, reason: "start failed: ",
			why:    []string{unpullable, "connection refused"},
			pulled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := imageTask(tc.image, "true")
			tk.Job.Spec.ImagePull = tc.pull
			mustStart(t, r, tk)
			u := waitTerminalWithin(t, rec, tk.Alloc.ID, time.Minute)
			if u.State != tc.state || !strings.HasPrefix(u.Reason, tc.reason) || len(tc.why) == 0 && u.Reason != tc.reason {
				t.Errorf("ended %+v, want %s: %q", u, tc.state, tc.reason)
			}
			for _, part := range tc.why {
				if !strings.Contains(u.Reason, part) {
					t.Errorf("reason %q does not say %q", u.Reason, part)
				}
			}
			var p structs.PullProgress
			found, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, pullFile), &p)
			if err != nil || found != tc.pulled || found && p.Image != tc.image {
				t.Errorf("pull.json found %v (%+v, %v), want it written: %v", found, p, err, tc.pulled)
			}
		})
	}
}

func TestContainer_ExpiredLeaseFencesTheContainer(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	e.grace = time.Hour
	e.leasePath = filepath.Join(t.TempDir(), "lease.json")
	e.fenceGrace = 300 * time.Millisecond
	r, _ := e.runner(t)
	if err := r.RenewLease(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tk := e.sh(`trap '' TERM; echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	waitFile(t, filepath.Join(dir, stdoutFile), "ready")
	r.Shutdown() // the agent is gone; nothing renews the lease now

	if err := writeJSONAtomic(e.leasePath, lease{ExpiresAt: time.Now().Add(-time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	var st status
	waitFor(t, 20*time.Second, "the job to stop itself", func() (bool, string) {
		found, err := readJSON(filepath.Join(dir, statusFile), &st)
		return found && err == nil, "no status.json yet (" + errString(err) + ")"
	})
	if st.State != structs.AllocKilled || st.Reason != "killed: "+fencedReason || st.Signal != "SIGKILL" {
		t.Fatalf("status = %+v, want killed by SIGKILL for the expired lease", st)
	}
	e.requireGone(t, jobOf(t, dir).ContainerID, "a fenced job's container goes")
}

// TestContainer_SupervisorKilledLeavesAContainerTheRunnerRemoves: the
// container outlives its supervisor; the runner reports the allocation
// lost and removes the container it left.
func TestContainer_SupervisorKilledLeavesAContainerTheRunnerRemoves(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	tk := e.sh(`echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	job := jobOf(t, dir)
	sup := pidOf(t, dir, supervisorPIDFile)
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocLost || u.Reason != lostReason {
		t.Errorf("ended %+v, want lost", u)
	}
	e.requireGone(t, job.ContainerID, "the runner removes what a dead supervisor left")
}

// TestContainer_OrphanWithoutJobPIDIsRemovedByName: a supervisor that
// died between creating the container and recording it leaves a
// container that only its name finds; the runner removes it, and never a
// container of that name that another runner's allocation directory owns.
func TestContainer_OrphanWithoutJobPIDIsRemovedByName(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	other := t.TempDir()
	containerSpecOf := func() spec {
		return spec{Driver: containerDriverName, Argv: []string{"true"}, KillGrace: structs.Duration(time.Second),
			Container: &containerSpec{Socket: engine.DefaultSocket, Image: e.image, Pull: structs.PullNever}}
	}
	ours := newAllocDir(t, e.testEnv, containerSpecOf())
	foreign := newAllocDir(t, e.testEnv, containerSpecOf())
	oursID := e.container(t, containerName(filepath.Base(ours)),
		map[string]string{engine.LabelAlloc: filepath.Base(ours), engine.LabelAllocDir: e.allocDir}, true)
	foreignID := e.container(t, containerName(filepath.Base(foreign)),
		map[string]string{engine.LabelAlloc: filepath.Base(foreign), engine.LabelAllocDir: other}, true)

	r, rec := e.runner(t)
	if _, err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{ours, foreign} {
		if u := waitTerminal(t, rec, filepath.Base(dir)); u.State != structs.AllocLost {
			t.Errorf("%s ended %+v, want lost", filepath.Base(dir), u)
		}
	}
	e.requireGone(t, oursID, "the orphan is found by its name")
	if st, found := e.inspect(t, foreignID); !found || !st.Running {
		t.Errorf("the container of another allocation directory was touched: found %v, %+v", found, st)
	}
}

// TestContainer_LeftoverOfTheSameAllocationIsReplacedNotDoubled: a
// supervisor that finds a container of its allocation (an earlier one
// died before it recorded the job) removes it before it runs the job, so
// the job never runs twice side by side.
func TestContainer_LeftoverOfTheSameAllocationIsReplacedNotDoubled(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	nobody := jobUser(t)
	dir := newAllocDir(t, e.testEnv, spec{Driver: containerDriverName, Argv: []string{"sh", "-c", "echo fresh"},
		User: nobody, KillGrace: structs.Duration(time.Second),
		Container: &containerSpec{Socket: engine.DefaultSocket, Image: e.image, Pull: structs.PullNever,
			User: fmt.Sprintf("%d:%d", nobody.UID, nobody.GID)}})
	id := filepath.Base(dir)
	leftover := e.container(t, containerName(id),
		map[string]string{engine.LabelAlloc: id, engine.LabelAllocDir: e.allocDir}, true)
	if code := startSupervisor(t, dir).exitCode(t); code != 0 {
		t.Fatalf("supervisor exited %d", code)
	}
	if st := readStatus(t, dir); st.State != structs.AllocSucceeded {
		t.Errorf("status = %+v, want the job run once to success", st)
	}
	if out := readFile(t, filepath.Join(dir, stdoutFile)); out != "fresh\n" {
		t.Errorf("stdout %q", out)
	}
	if job := jobOf(t, dir); job.ContainerID == leftover {
		t.Errorf("job.pid records the leftover %s", leftover)
	}
	e.requireGone(t, leftover, "the leftover is removed before the job runs")
}

func TestCleanContainers_RemovesOnlyThisRunnersOrphans(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	live := e.sh(`echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, live)
	waitState(t, rec, live.Alloc.ID, structs.AllocRunning)

	over := newAllocID()
	if err := os.Mkdir(filepath.Join(e.allocDir, over), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSONAtomic(filepath.Join(e.allocDir, over, statusFile), status{State: structs.AllocLost}); err != nil {
		t.Fatal(err)
	}
	noDir := newAllocID()
	labels := func(id, dir string) map[string]string {
		return map[string]string{engine.LabelAlloc: id, engine.LabelAllocDir: dir}
	}
	overID := e.container(t, "skein-test-"+over, labels(over, e.allocDir), true)
	noDirID := e.container(t, "skein-test-"+noDir, labels(noDir, e.allocDir), false)
	foreignID := e.container(t, "skein-test-"+newAllocID(), labels(over, t.TempDir()), true)

	n, err := r.CleanContainers(context.Background())
	if n != 2 || err != nil {
		t.Errorf("CleanContainers = %d, %v; want the 2 whose allocations are over here", n, err)
	}
	e.requireGone(t, overID, "its allocation recorded an outcome")
	e.requireGone(t, noDirID, "its allocation has no directory")
	if _, found := e.inspect(t, foreignID); !found {
		t.Error("a container of another allocation directory was removed")
	}
	if st, found := e.inspect(t, containerName(live.Alloc.ID)); !found || !st.Running {
		t.Errorf("the live job's container: found %v, %+v; want it running", found, st)
	}
	r.Stop(live.Alloc.ID, "done")
	waitTerminal(t, rec, live.Alloc.ID)
}

// TestContainer_KeptFailedContainerGoesWithItsDirectory: with KeepFailed,
// the container of a job that failed by itself stays, through
// CleanContainers, until its allocation's directory goes; a stopped job's
// container goes at once.
func TestContainer_KeptFailedContainerGoesWithItsDirectory(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.KeepFailed = true })
	failed := e.sh("exit 5")
	mustStart(t, r, failed)
	if u := waitTerminal(t, rec, failed.Alloc.ID); u.State != structs.AllocFailed || u.ExitCode != 5 {
		t.Fatalf("ended %+v, want failed with code 5", u)
	}
	kept := jobOf(t, filepath.Join(e.allocDir, failed.Alloc.ID)).ContainerID
	if st, found := e.inspect(t, kept); !found || st.Running || st.ExitCode != 5 {
		t.Fatalf("the failed job's container: found %v, %+v; want it kept, exited 5", found, st)
	}

	stopped := e.sh(`echo ready; while :; do sleep 0.05; done`)
	mustStart(t, r, stopped)
	waitFile(t, filepath.Join(e.allocDir, stopped.Alloc.ID, stdoutFile), "ready")
	r.StopWithin(stopped.Alloc.ID, "cancelled", 100*time.Millisecond)
	if u := waitTerminal(t, rec, stopped.Alloc.ID); u.State != structs.AllocKilled {
		t.Fatalf("ended %+v, want killed", u)
	}
	e.requireGone(t, jobOf(t, filepath.Join(e.allocDir, stopped.Alloc.ID)).ContainerID, "a stopped job did not fail by itself")

	if n, err := r.CleanContainers(context.Background()); n != 0 || err != nil {
		t.Errorf("CleanContainers = %d, %v; want the kept container left while its directory is there", n, err)
	}
	waitFor(t, 10*time.Second, "the failed allocation forgotten", func() (bool, string) {
		err := r.Forget(failed.Alloc.ID)
		return err == nil, errString(err)
	})
	if n, err := r.CleanContainers(context.Background()); n != 1 || err != nil {
		t.Errorf("CleanContainers = %d, %v; want the kept container removed with its directory", n, err)
	}
	e.requireGone(t, kept, "its directory is gone")
}

// TestContainer_RestoredRunnerAdoptsARunningContainer: a new runner adopts
// the supervisor of a running container job, and the job ends normally.
func TestContainer_RestoredRunnerAdoptsARunningContainer(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	work := testutil.SharedDir(t)
	allow := func(c *Config) { c.AllowMounts = []string{work} }
	r1, rec1 := e.runner(t, allow)
	tk := e.sh(`echo started; until [ -e /w/go ]; do sleep 0.05; done; echo done`)
	tk.Job.Spec.Mounts = []structs.Mount{{Source: work, Target: "/w"}}
	mustStart(t, r1, tk)
	waitState(t, rec1, tk.Alloc.ID, structs.AllocRunning)
	r1.Shutdown()

	r2, rec2 := e.runner(t, allow)
	adopted, err := r2.Restore()
	if err != nil || !slices.Contains(adopted, tk.Alloc.ID) {
		t.Fatalf("Restore = %v, %v; want %s adopted", adopted, err, tk.Alloc.ID)
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec2, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Errorf("ended %+v, want the adopted job to succeed", u)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	if out := readFile(t, filepath.Join(dir, stdoutFile)); out != "started\ndone\n" {
		t.Errorf("stdout %q", out)
	}
	e.requireGone(t, jobOf(t, dir).ContainerID, "an adopted job's container goes at its end too")
}
