package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
	"golang.org/x/sys/unix"
)

// TestConfine_AJobCannotGrowItsOwnLogs: a job appending to its own log
// files in its allocation's directory (dd oflag=append, past --log-max)
// is refused; its logs hold only what went through the supervisor's
// pipes, within the cap.
func TestConfine_AJobCannotGrowItsOwnLogs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.logMax = MinLogMax
	r, rec := e.runner(t)
	tk := sh(`for f in ../stdout.log ../stderr.log; do
  if dd if=/dev/zero of=$f bs=64k count=64 oflag=append conv=notrunc 2>/dev/null; then echo "wrote $f"; else echo "refused $f"; fi
done`)
	mustStart(t, r, tk)
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("job ended %+v", u)
	}
	out := readAll(t, r, tk.Alloc.ID, "stdout")
	if strings.Contains(out, "wrote") || strings.Count(out, "refused") != 2 {
		t.Errorf("the job's own writes to its logs: %q (of %d bytes), want both refused", out[:min(len(out), 80)], len(out))
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	for _, name := range []string{stdoutFile, stderrFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > MinLogMax {
			t.Errorf("%s holds %d bytes, more than the log cap %d", name, fi.Size(), MinLogMax)
		}
	}
}

// confinedHierarchy is the hierarchy the test runners confine jobs in,
// or skips the test where the machine offers none.
func confinedHierarchy(t *testing.T) *cgroup.Hierarchy {
	t.Helper()
	h, why := testutil.Cgroups()
	if h == nil {
		t.Skipf("jobs run unconfined here: %s", why)
	}
	return h
}

// groupOf is the control group of an allocation.
func groupOf(t *testing.T, h *cgroup.Hierarchy, allocID string) *cgroup.Group {
	t.Helper()
	g, err := h.Group(allocID)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestConfine_AJobOverItsMemoryFailsOutOfMemory: a job that grows past
// --mem is killed by the kernel and reported failed, out of memory, with
// what it used of what it had, its exit code and its usage.
func TestConfine_AJobOverItsMemoryFailsOutOfMemory(t *testing.T) {
	t.Parallel()
	h := confinedHierarchy(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := task("tail", "/dev/zero") // buffers a line that never ends
	tk.Alloc.MemoryMiB = 32
	mustStart(t, r, tk)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocFailed || u.Reason != "out of memory: used 32M of its 32M limit" || u.ExitCode != 128+9 {
		t.Fatalf("job over its memory ended %s (exit %d): %q; want failed (exit 137): out of memory: used 32M of its 32M limit",
			u.State, u.ExitCode, u.Reason)
	}
	if u.Usage == nil || u.Usage.OOMKills < 1 || u.Usage.MemoryLimitBytes != 32<<20 || u.Usage.MemoryPeakBytes > 32<<20+64<<10 {
		t.Errorf("usage %+v: want an OOM kill, the 32M limit and a peak within a few pages of it", u.Usage)
	}
	if groupOf(t, h, tk.Alloc.ID).Exists() {
		t.Error("the job's cgroup is still there after the job")
	}
}

// TestConfine_AJobWithinItsMemorySucceedsWithItsUsage: a job that stays
// under --mem runs to the end, and what it used is recorded.
func TestConfine_AJobWithinItsMemorySucceedsWithItsUsage(t *testing.T) {
	t.Parallel()
	confinedHierarchy(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh(`x=$(head -c 20000000 /dev/zero | tr '\0' a); echo ${#x}`)
	tk.Alloc.MemoryMiB = 256
	mustStart(t, r, tk)
	u := waitTerminal(t, rec, tk.Alloc.ID)
	if u.State != structs.AllocSucceeded {
		t.Fatalf("job ended %+v", u)
	}
	if u.Usage == nil || u.Usage.OOMKills != 0 || u.Usage.MemoryPeakBytes < 20_000_000 || u.Usage.CPUTime <= 0 {
		t.Errorf("usage %+v: want no OOM kill, a peak of at least the 20 MB the job held, and some CPU time", u.Usage)
	}
}

// TestConfine_AOneGPUJobOpensOnlyItsOwnGPU: on a node of eight GPUs, a
// job holding one opens its own GPU's device node and gets EPERM on the
// other seven (the nodes are made with mknod, as NVIDIA's: major 195,
// minor = the GPU's index).
func TestConfine_AOneGPUJobOpensOnlyItsOwnGPU(t *testing.T) {
	t.Parallel()
	confinedHierarchy(t)
	dev, minors := gpuDeviceNodes(t, 8)
	e := newEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.GPUMinors = minors })
	tk := sh(fmt.Sprintf(`for i in 0 1 2 3 4 5 6 7; do
  if (: <> %s/nvidia$i) 2>&1 | grep -q 'not permitted'; then echo "$i refused"; else echo "$i let through"; fi
done`, dev))
	tk.Alloc.GPUs = []string{"GPU-3"}
	got := stdoutOf(t, r, rec, e.allocDir, tk)
	var want strings.Builder
	for i := range 8 {
		if i == 3 {
			fmt.Fprintf(&want, "%d let through\n", i)
		} else {
			fmt.Fprintf(&want, "%d refused\n", i)
		}
	}
	if got != want.String() {
		t.Errorf("a job holding GPU 3 of 8 opened:\n%s\nwant:\n%s", got, want.String())
	}
}

// TestConfine_ACommandExecutedBesideAJobIsHeldAsTheJobIs: skein exec
// (and a terminal) runs its command in the job's cgroup, so it opens only
// the job's GPU and counts against the job's limits; outside it, it
// would open every GPU of the node.
func TestConfine_ACommandExecutedBesideAJobIsHeldAsTheJobIs(t *testing.T) {
	t.Parallel()
	confinedHierarchy(t)
	dev, minors := gpuDeviceNodes(t, 4)
	e := newEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.GPUMinors = minors })
	tk := sh("sleep 3600")
	tk.Alloc.GPUs = []string{"GPU-2"}
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	res := waitExec(t, r, tk.Alloc.ID, "sh", "-c", fmt.Sprintf(`for i in 0 1 2 3; do
  if (: <> %s/nvidia$i) 2>&1 | grep -q 'not permitted'; then echo "$i refused"; else echo "$i let through"; fi
done`, dev))
	if want := "0 refused\n1 refused\n2 let through\n3 refused\n"; res.Output != want {
		t.Errorf("a command run beside a job holding GPU 2 of 4 opened:\n%s\nwant:\n%s", res.Output, want)
	}
}

// gpuDeviceNodes makes n device nodes nvidia0..n-1 of NVIDIA's major,
// open to every user, in a directory jobs reach, and returns it with the
// minors of the simulated GPUs GPU-0..GPU-n-1.
func gpuDeviceNodes(t *testing.T, n int) (string, map[string]uint32) {
	t.Helper()
	dev := testutil.JobDir(t)
	minors := make(map[string]uint32)
	for i := range n {
		p := filepath.Join(dev, fmt.Sprintf("nvidia%d", i))
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(cgroup.NVIDIAMajor, uint32(i)))); err != nil {
			t.Skipf("mknod %s: %v", p, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			t.Fatal(err)
		}
		minors[fmt.Sprintf("GPU-%d", i)] = uint32(i)
	}
	return dev, minors
}

// gone reports whether a process has ended (or is a zombie).
func gone(pid int) bool {
	state, _, err := procStat(pid)
	return err != nil || state == 'Z' || state == 'X'
}

// TestConfine_ASetsidDaemonDiesWithItsJob: a process the job started in a
// session of its own does not outlive the job.
func TestConfine_ASetsidDaemonDiesWithItsJob(t *testing.T) {
	t.Parallel()
	confinedHierarchy(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	work := testutil.SharedDir(t)
	tk := sh(`setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' & until [ -s daemon.pid ]; do sleep 0.01; done; echo started`)
	tk.Job.Spec.Workdir = work
	stdoutOf(t, r, rec, e.allocDir, tk)
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(work, "daemon.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if !gone(pid) {
		t.Fatalf("the job's setsid daemon (pid %d) outlived the job", pid)
	}
}

// TestConfine_AForkBombStopsAtThePidsLimit: a fork bomb runs into its
// group's process limit (its forks fail) and never holds more, and goes
// with its job.
func TestConfine_AForkBombStopsAtThePidsLimit(t *testing.T) {
	t.Parallel()
	h := confinedHierarchy(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh(`b() { b | b & }; b; sleep 1000`)
	tk.Job.Spec.PidsMax = 64
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	g := groupOf(t, h, tk.Alloc.ID)
	most := 0
	waitFor(t, time.Minute, "the fork bomb to run into its limit", func() (bool, string) {
		pids, err := g.Procs()
		most = max(most, len(pids))
		errOut, _ := os.ReadFile(filepath.Join(e.allocDir, tk.Alloc.ID, stderrFile))
		return strings.Contains(string(errOut), "fork"), fmt.Sprintf("%d processes (%v); stderr %q", len(pids), err, errOut[:min(len(errOut), 200)])
	})
	if most > 64 {
		t.Errorf("the group held %d processes under a limit of 64", most)
	}
	r.Stop(tk.Alloc.ID, "test over")
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocKilled {
		t.Fatalf("the fork bomb ended %+v, want killed", u)
	}
	if g.Exists() {
		t.Error("the fork bomb's cgroup is still there")
	}
}

// TestConfine_ABusyJobGetsOneCPU: a job given one CPU that spins on two
// uses, by its cgroup's count, no more than one CPU's worth of the time
// it ran (read from the cgroup, not timed); where the machine had a
// second CPU free for it, the quota held it back, and that is recorded.
func TestConfine_ABusyJobGetsOneCPU(t *testing.T) {
	t.Parallel()
	h := confinedHierarchy(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := sh(`spin() { while :; do :; done; }; spin & spin & wait`)
	tk.Alloc.CPUs = 1
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	g := groupOf(t, h, tk.Alloc.ID)
	waitFor(t, time.Minute, "the job to use a second of CPU", func() (bool, string) {
		st, err := g.Stats()
		return err == nil && st.CPU >= time.Second, fmt.Sprintf("%+v %v", st, err)
	})
	r.Stop(tk.Alloc.ID, "test over")
	u := waitTerminal(t, rec, tk.Alloc.ID)
	ran := u.At.Sub(waitState(t, rec, tk.Alloc.ID, structs.AllocRunning).At)
	if u.Usage == nil || u.Usage.CPUTime < structs.Duration(time.Second) {
		t.Fatalf("usage %+v: want the second of CPU recorded", u.Usage)
	}
	if used := time.Duration(u.Usage.CPUTime); used > ran+2*cgroup.CFSPeriod {
		t.Errorf("two busy loops used %s of CPU in %s under --cpus 1", used, ran)
	}
	if (u.Usage.ThrottledPeriods > 0) != (u.Usage.CPUThrottled > 0) {
		t.Errorf("usage %+v: throttled periods and time disagree", u.Usage)
	}
	t.Logf("used %s of CPU in %s; throttled %d periods, %s", time.Duration(u.Usage.CPUTime), ran,
		u.Usage.ThrottledPeriods, time.Duration(u.Usage.CPUThrottled))
}

// TestConfine_PinnedJobsGetCPUsOfTheirOwn: on a node that pins jobs to
// CPUs, two one-CPU jobs run on different CPUs, and each on one only.
func TestConfine_PinnedJobsGetCPUsOfTheirOwn(t *testing.T) {
	t.Parallel()
	confinedHierarchy(t)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
		t.Skipf("needs two CPUs to pin two jobs apart (%d, %v)", set.Count(), err)
	}
	e := newEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.PinCPUs = true })
	work := testutil.SharedDir(t)
	var tks []Task
	for i := range 2 {
		tk := sh(fmt.Sprintf(`grep Cpus_allowed_list /proc/self/status > cpus%d; until [ -e done ]; do sleep 0.01; done`, i))
		tk.Job.Spec.Workdir = work
		tk.Alloc.CPUs = 1
		mustStart(t, r, tk)
		waitFile(t, filepath.Join(work, fmt.Sprintf("cpus%d", i)), "\n")
		tks = append(tks, tk)
	}
	if err := os.WriteFile(filepath.Join(work, "done"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var lists []string
	for i, tk := range tks {
		if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
			t.Fatalf("job %d ended %+v", i, u)
		}
		_, list, _ := strings.Cut(readFile(t, filepath.Join(work, fmt.Sprintf("cpus%d", i))), ":")
		lists = append(lists, strings.TrimSpace(list))
	}
	for i, l := range lists {
		if len(parseCPUList(l)) != 1 {
			t.Errorf("job %d runs on CPUs %q, want one", i, l)
		}
	}
	if lists[0] == lists[1] {
		t.Errorf("both one-CPU jobs run on CPU %s", lists[0])
	}
}

// TestConfine_ANodeThatCannotConfineRefusesJobs: without cgroups, and
// without the operator's leave to run jobs unconfined, a job fails to
// start and says why.
func TestConfine_ANodeThatCannotConfineRefusesJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.runner(t, func(c *Config) {
		c.Cgroups, c.Unconfined, c.AllowUnconfined = nil, "no cgroup hierarchy here", false
	})
	if !strings.Contains(r.Refuses(), "--allow-unconfined") {
		t.Errorf("Refuses() = %q, want it to name --allow-unconfined", r.Refuses())
	}
	// The caller (the node) reports a start that fails this way.
	tk := task("true")
	err := r.Start(tk)
	if err == nil || !strings.Contains(err.Error(), "cannot confine jobs: no cgroup hierarchy here") {
		t.Fatalf("Start on a node that cannot confine: %v, want it refused, saying why", err)
	}
	var st status
	if found, _ := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, statusFile), &st); !found || st.State != structs.AllocFailed {
		t.Errorf("status.json %+v, want the start recorded failed", st)
	}
}

// startWithDaemon starts a job that leaves a daemon in a session of its
// own and runs on; it returns the task and the daemon's pid, which the
// test's end kills whatever happened.
func startWithDaemon(t *testing.T, r *Runner, rec *recorder) (Task, int) {
	t.Helper()
	work := testutil.SharedDir(t)
	tk := sh(`setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' & sleep 1000`)
	tk.Job.Spec.Workdir = work
	mustStart(t, r, tk)
	waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
	waitFile(t, filepath.Join(work, "daemon.pid"), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(work, "daemon.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return tk, pid
}

// TestConfine_AnAdoptedJobKeepsItsGroup: a job whose runner was replaced
// (an agent restart) stays in its group, and still dies with it.
func TestConfine_AnAdoptedJobKeepsItsGroup(t *testing.T) {
	t.Parallel()
	h := confinedHierarchy(t)
	e := newEnv(t)
	r1, rec1 := e.runner(t)
	tk, pid := startWithDaemon(t, r1, rec1)
	r1.Shutdown()

	r2, rec2 := e.runner(t)
	if ids, err := r2.Restore(); err != nil || !slices.Contains(ids, tk.Alloc.ID) {
		t.Fatalf("Restore adopted %v (%v), want %s", ids, err, tk.Alloc.ID)
	}
	g := groupOf(t, h, tk.Alloc.ID)
	if pids, err := g.Procs(); err != nil || !slices.Contains(pids, pid) {
		t.Fatalf("after the restart the group lists %v (%v), want the daemon %d in it", pids, err, pid)
	}
	r2.Stop(tk.Alloc.ID, "test over")
	if u := waitTerminal(t, rec2, tk.Alloc.ID); u.State != structs.AllocKilled {
		t.Fatalf("ended %+v", u)
	}
	if !gone(pid) || g.Exists() {
		t.Errorf("after the adopted job's stop: daemon gone %v, group there %v; want gone, not there", gone(pid), g.Exists())
	}
}

// TestConfine_ADeadSupervisorsGroupIsKilled: when a supervisor dies, the
// runner kills everything in its job's group, daemons included, and
// removes the group.
func TestConfine_ADeadSupervisorsGroupIsKilled(t *testing.T) {
	t.Parallel()
	h := confinedHierarchy(t)
	e := newEnv(t)
	r, rec := e.runner(t)
	tk, pid := startWithDaemon(t, r, rec)
	var sup procRecord
	if found, err := readJSON(filepath.Join(e.allocDir, tk.Alloc.ID, supervisorPIDFile), &sup); !found || err != nil {
		t.Fatalf("supervisor.pid: %v", err)
	}
	if err := syscall.Kill(sup.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocLost {
		t.Fatalf("ended %+v, want lost", u)
	}
	if !gone(pid) || groupOf(t, h, tk.Alloc.ID).Exists() {
		t.Errorf("after its supervisor died: daemon gone %v, group there %v; want gone, not there",
			gone(pid), groupOf(t, h, tk.Alloc.ID).Exists())
	}
}

// TestConfine_AFencedJobDiesWithItsGroup: a node whose lease ran out stops
// its jobs whole: a daemon one left in a session of its own goes too.
func TestConfine_AFencedJobDiesWithItsGroup(t *testing.T) {
	t.Parallel()
	h := confinedHierarchy(t)
	e := newEnv(t)
	e.leasePath = filepath.Join(t.TempDir(), "lease.json")
	e.fenceGrace = 200 * time.Millisecond
	r, rec := e.runner(t)
	if err := r.RenewLease(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tk, pid := startWithDaemon(t, r, rec)
	if err := r.RenewLease(time.Now().Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocKilled || u.Reason != "killed: "+fencedReason {
		t.Fatalf("got %+v, want the job fenced", u)
	}
	if !gone(pid) || groupOf(t, h, tk.Alloc.ID).Exists() {
		t.Errorf("after the fence: daemon gone %v, group there %v; want gone, not there", gone(pid), groupOf(t, h, tk.Alloc.ID).Exists())
	}
}
