package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// Tests that an image job stays inside what it was given: its account,
// no privileges, only the mounts that were checked. Each is an attack
// the job loses, on the real engine; they skip where no engine answers.

// privsImage is the busybox test image with privs (testdata/privs)
// installed setuid root as /usr/local/bin/privs, built at most once per
// test binary; its tag names its content.
func privsImage(t *testing.T) string {
	t.Helper()
	base := testutil.BusyboxImage(t)
	privs.once.Do(func() { privs.tag, privs.err = buildPrivsImage(base) })
	if privs.err != nil {
		t.Fatal(privs.err)
	}
	return privs.tag
}

var privs struct {
	once sync.Once
	tag  string
	err  error
}

func buildPrivsImage(base string) (string, error) {
	dir, err := os.MkdirTemp("", "skein-privs-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "privs"), "./testdata/privs")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", errors.New("build privs: " + err.Error() + "\n" + string(out))
	}
	bin, err := os.ReadFile(filepath.Join(dir, "privs"))
	if err != nil {
		return "", err
	}
	dockerfile := "FROM " + base + "\nCOPY privs /usr/local/bin/privs\nRUN chmod 4755 /usr/local/bin/privs\n"
	sum := sha256.Sum256(append(bin, dockerfile...))
	tag := "skein-test-privs:" + hex.EncodeToString(sum[:])[:12]
	if exec.Command("docker", "image", "inspect", tag).Run() == nil {
		return tag, nil
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		return "", errors.New("docker build " + tag + ": " + err.Error() + "\n" + string(out))
	}
	return tag, nil
}

// privsReport reads what privs printed: each line's first word (with
// its colon) to the rest.
func privsReport(out string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			if strings.HasPrefix(k, "read") {
				k, v, _ = strings.Cut(line, ": ")
			}
			m[k] = v
		}
	}
	return m
}

// noCaps is a capability set without a capability.
const noCaps = "0000000000000000"

// wantPrivs fails the test for each of want's lines that privs did not
// print as want says.
func wantPrivs(t *testing.T, out string, want map[string]string) {
	t.Helper()
	got := privsReport(out)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("privs printed %s %q, want %q; all it printed:\n%s", k, got[k], v, out)
		}
	}
}

// four is an id as /proc/self/status gives it: real, effective, saved
// and file-system.
func four(id int) string { s := strconv.Itoa(id); return s + " " + s + " " + s + " " + s }

// TestContainer_SetuidRootBinaryLeavesTheJobItsAccount: a setuid-root
// binary in the image does not make the job root: the container runs
// with no-new-privileges and no capabilities, so the job keeps its uid
// and gid, and cannot make itself root. A job an admin lets run as root
// is root without a capability. A command run beside the job (exec) is
// held the same.
func TestContainer_SetuidRootBinaryLeavesTheJobItsAccount(t *testing.T) {
	t.Parallel()
	image := privsImage(t)
	alice := testutil.LocalUser(t)
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	held := map[string]string{"CapPrm:": noCaps, "CapEff:": noCaps, "CapBnd:": noCaps, "CapAmb:": noCaps, "NoNewPrivs:": "1"}
	with := func(m map[string]string) map[string]string {
		for k, v := range held {
			m[k] = v
		}
		return m
	}

	t.Run("the job's account", func(t *testing.T) {
		t.Parallel()
		tk := imageTask(image, "privs")
		tk.Job.Owner = alice.Name
		wantPrivs(t, stdoutOf(t, r, rec, e.allocDir, tk),
			with(map[string]string{"Uid:": four(alice.UID), "Gid:": four(alice.GID), "setuid:": "denied"}))
	})
	t.Run("root, allowed by an admin, without capabilities", func(t *testing.T) {
		t.Parallel()
		tk := imageTask(image, "privs")
		tk.Job.Owner, tk.Job.AllowRoot = "root", true
		wantPrivs(t, stdoutOf(t, r, rec, e.allocDir, tk), with(map[string]string{"Uid:": four(0)}))
	})
	t.Run("a command run beside the job", func(t *testing.T) {
		t.Parallel()
		tk := imageTask(image, "sh", "-c", "echo ready; exec sleep 60")
		tk.Job.Owner = alice.Name
		mustStart(t, r, tk)
		waitState(t, rec, tk.Alloc.ID, structs.AllocRunning)
		waitFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile), "ready")
		res, err := r.Exec(t.Context(), tk.Alloc.ID, []string{"privs"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Exec = %+v, %v", res, err)
		}
		wantPrivs(t, res.Output, with(map[string]string{"Uid:": four(alice.UID), "setuid:": "denied"}))
		r.StopWithin(tk.Alloc.ID, "done", 100*time.Millisecond)
		waitTerminal(t, rec, tk.Alloc.ID)
	})
}

// TestContainer_AnotherUsersFileThroughAMountStaysTheirs: a file of
// another account (or root's), 0600, in an allowed mount: the job reads
// it neither as itself nor through a setuid-root binary; the kernel
// refuses it, as on the host.
func TestContainer_AnotherUsersFileThroughAMountStaysTheirs(t *testing.T) {
	t.Parallel()
	image := privsImage(t)
	alice, bob := testutil.LocalUser(t), testutil.LocalUser(t)
	e := newContainerEnv(t)
	shared := testutil.JobDir(t)
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, owner := range map[string]int{"bobs": bob.UID, "roots": 0, "public": bob.UID} {
		path := filepath.Join(shared, name)
		mode := os.FileMode(0o600)
		if name == "public" {
			mode = 0o644
		}
		if err := os.WriteFile(path, []byte(name+" secret\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(path, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	r, rec := e.runner(t, func(c *Config) { c.AllowMounts = []string{shared} })
	tk := imageTask(image, "sh", "-c", "cat /m/bobs 2>&1; privs /m/bobs /m/roots /m/public")
	tk.Job.Owner = alice.Name
	tk.Job.Spec.Mounts = []structs.Mount{{Source: shared, Target: "/m", ReadOnly: true}}
	out := stdoutOf(t, r, rec, e.allocDir, tk)
	if !strings.HasPrefix(out, "cat: can't open '/m/bobs': Permission denied\n") {
		t.Errorf("cat of another's file printed %q, want it refused", strings.SplitN(out, "\n", 2)[0])
	}
	wantPrivs(t, out, map[string]string{"read /m/bobs": "denied", "read /m/roots": "denied",
		"read /m/public": "public secret", "Uid:": four(alice.UID)})
}

// swapper swaps a directory for a link to another and back.
type swapper struct {
	src, real, to string
}

// newSwapper makes src, a directory holding marker "inside", and to, a
// directory outside every allowed one holding marker "outside".
func newSwapper(t *testing.T, allowed string) *swapper {
	t.Helper()
	s := &swapper{src: filepath.Join(allowed, "src"), real: filepath.Join(allowed, "src.real"), to: testutil.JobDir(t)}
	for dir, text := range map[string]string{s.src: "inside\n", s.to: "outside\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// toLink puts the link where src was.
func (s *swapper) toLink() error {
	if err := os.Rename(s.src, s.real); err != nil {
		return err
	}
	return os.Symlink(s.to, s.src)
}

// back puts src back where the link was.
func (s *swapper) back() error {
	if err := os.Remove(s.src); err != nil {
		return err
	}
	return os.Rename(s.real, s.src)
}

// imageSpec is the spec the runner writes for tk, run as the job user,
// with its container section as r resolves it: its mounts checked now.
func imageSpec(t *testing.T, r *Runner, tk Task) spec {
	t.Helper()
	acct := jobUser(t)
	c, err := r.containerSpec(tk, *acct)
	if err != nil {
		t.Fatalf("the runner refuses the container: %v", err)
	}
	return spec{Driver: containerDriverName, Argv: tk.Job.Spec.Command, User: acct,
		KillGrace: structs.Duration(time.Second), Container: c}
}

// TestContainer_SourceSwappedForALinkAfterTheCheckIsNotMounted: the
// runner checks a mount, then its source becomes a link out of the
// allowed directory before the supervisor starts the job: the job never
// sees where the link leads.
func TestContainer_SourceSwappedForALinkAfterTheCheckIsNotMounted(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	allowed := testutil.SharedDir(t)
	s := newSwapper(t, allowed)
	r, _ := e.runner(t, func(c *Config) { c.AllowMounts = []string{allowed} })
	tk := imageTask(e.image, "cat", "/m/marker")
	tk.Job.Spec.Mounts = []structs.Mount{{Source: s.src, Target: "/m"}}
	sp := imageSpec(t, r, tk)
	if err := s.toLink(); err != nil {
		t.Fatal(err)
	}
	dir := newAllocDir(t, e.testEnv, sp)
	startSupervisor(t, dir).exitCode(t)
	out := readFile(t, filepath.Join(dir, stdoutFile))
	if strings.Contains(out, "outside") {
		t.Fatalf("the job read %q through the link the source became", out)
	}
	if st := readStatus(t, dir); st.State != structs.AllocFailed || !strings.Contains(st.Reason, s.src) {
		t.Errorf("status = %+v, want a start failure naming the source %s", st, s.src)
	}
}

// TestContainer_SourceSwappingWhileJobsStartNeverLeadsOut: while jobs
// start, their mount's source is swapped for a link out of the allowed
// directory and back, again and again; whichever moment each start
// meets, no job sees where the link leads.
func TestContainer_SourceSwappingWhileJobsStartNeverLeadsOut(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	allowed := testutil.SharedDir(t)
	s := newSwapper(t, allowed)
	r, rec := e.runner(t, func(c *Config) { c.AllowMounts = []string{allowed} })

	stop, swapped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { swapped <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.toLink(); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond) // each state lasts a moment,
			if err := s.back(); err != nil {
				t.Error(err)
				return
			}
			n++
			time.Sleep(3 * time.Millisecond) // the source's a little longer
		}
	}()
	const jobs = 12
	var started []Task
	refused := 0
	for range jobs {
		tk := imageTask(e.image, "cat", "/m/marker")
		tk.Job.Spec.Mounts = []structs.Mount{{Source: s.src, Target: "/m"}}
		if err := r.Start(tk); err != nil {
			if !errors.Is(err, ErrMountRefused) {
				t.Errorf("Start = %v, want it to run or %v", err, ErrMountRefused)
			}
			refused++
			continue
		}
		started = append(started, tk)
	}
	ran := 0
	for _, tk := range started {
		u := waitTerminalWithin(t, rec, tk.Alloc.ID, time.Minute)
		out := readFile(t, filepath.Join(e.allocDir, tk.Alloc.ID, stdoutFile))
		if strings.Contains(out, "outside") {
			t.Errorf("job %s read %q through the link (ended %+v)", tk.Alloc.ID, out, u)
		}
		if u.State == structs.AllocSucceeded {
			ran++
		}
	}
	close(stop)
	if len(started) == 0 {
		t.Errorf("the runner refused all %d jobs: none was started while the source was swapped", jobs)
	}
	t.Logf("%d jobs: %d refused by the runner, %d refused when started, %d ran; the source was swapped %d times",
		jobs, refused, len(started)-ran, ran, <-swapped)
}

// TestContainer_WritableSourceIsRefusedWhereItCannotBeMountedSafely:
// where the supervisor cannot check that the engine mounts what it
// opened (here: it runs in a process namespace of its own, where the
// engine is not to be seen), a source below a directory a user can
// write is refused, since the engine would look it up again by its
// path; a source no user can swap is mounted by its path.
func TestContainer_WritableSourceIsRefusedWhereItCannotBeMountedSafely(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	nobody := jobUser(t)
	shared, safe := testutil.SharedDir(t), testutil.JobDir(t)
	mine := filepath.Join(shared, "mine")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(mine, int(nobody.UID), int(nobody.GID)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(safe, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{mine, safe} {
		if err := os.WriteFile(filepath.Join(d, "marker"), []byte("marked\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := e.runner(t, func(c *Config) { c.AllowMounts = []string{shared, safe} })
	cases := []struct {
		name   string
		source string
		refuse string // part of the start failure; "" when the job runs
	}{
		{name: "a source its user may swap is refused", source: mine, refuse: shared + " lets a user replace " + mine},
		{name: "a source no user may swap is mounted by its path", source: safe},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := imageTask(e.image, "cat", "/m/marker")
			tk.Job.Spec.Mounts = []structs.Mount{{Source: tc.source, Target: "/m"}}
			dir := newAllocDir(t, e.testEnv, imageSpec(t, r, tk))
			startSupervisorIn(t, dir, syscall.CLONE_NEWPID).exitCode(t)
			st := readStatus(t, dir)
			out := readFile(t, filepath.Join(dir, stdoutFile))
			switch {
			case tc.refuse == "" && (st.State != structs.AllocSucceeded || out != "marked\n"):
				t.Errorf("status = %+v, printed %q; want the mount read", st, out)
			case tc.refuse != "" && (st.State != structs.AllocFailed || !strings.Contains(st.Reason, tc.refuse) || out != ""):
				t.Errorf("status = %+v, printed %q; want a start failure saying %q", st, out, tc.refuse)
			}
		})
	}
}

// startSupervisorIn is startSupervisor, the supervisor in the new
// namespaces cloneflags names.
func startSupervisorIn(t *testing.T, dir string, cloneflags uintptr) *supervisorProc {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(dir, supervisorLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(os.Args[0], dir)
	cmd.Env = append(os.Environ(), superviseEnv+"=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start supervisor: %v", err)
	}
	p := &supervisorProc{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// TestStageMounts_ASwapAfterTheOpenChangesNothing: between the
// supervisor's open of a source and the engine's mount of it, the source
// becomes a link out of the allowed directory: the engine mounts the
// directory that was opened all the same.
func TestStageMounts_ASwapAfterTheOpenChangesNothing(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	allowed := testutil.SharedDir(t)
	s := newSwapper(t, allowed)
	mounts, err := checkMounts([]structs.Mount{{Source: s.src, Target: "/m"}}, []string{allowed})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := e.d.ServerPID(t.Context())
	if err != nil || pid == 0 {
		t.Skipf("the engine's process is not to be seen from here (%d, %v): nothing is bound", pid, err)
	}
	dir := mountStageDir(e.allocDir, newAllocID())
	staged, stage, err := stageMounts(mounts, dir, "/proc/"+strconv.Itoa(pid)+"/root", "", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stage.release()
	if len(staged) != 1 || staged[0].Source != filepath.Join(realPath(t, dir), "0") {
		t.Fatalf("staged %+v, want the source bound at %s/0", staged, dir)
	}
	if err := s.toLink(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	id, err := e.d.Create(ctx, engine.ContainerSpec{Name: "skein-test-" + newAllocID(), Image: e.image, User: "65534:65534",
		Labels: map[string]string{engine.LabelAllocDir: e.allocDir}, Cmd: []string{"cat", "/m/marker"}, Mounts: staged})
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut strings.Builder
	end, err := e.d.Attach(ctx, id, &syncWriter{w: &out}, &syncWriter{w: &errOut})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	stage.release()
	if _, err := e.d.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	<-end
	if out.String() != "inside\n" {
		t.Errorf("the container read %q (stderr %q), want the directory that was opened", out.String(), errOut.String())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stage %s is still there once released (%v)", dir, err)
	}
}

// syncWriter is a writer safe for the attach stream's goroutine.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	parent, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(parent, filepath.Base(p))
}

// TestContainer_MountIsTheOpenedSourceBoundWhereOnlyRootReaches: the
// engine mounts the source from the allocation's stage, a bind mount of
// the source the supervisor opened, under a directory only root reaches;
// the bind is gone once the container has started, and the container
// keeps its mount.
func TestContainer_MountIsTheOpenedSourceBoundWhereOnlyRootReaches(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	allowed := testutil.SharedDir(t)
	s := newSwapper(t, allowed)
	r, rec := e.runner(t, func(c *Config) { c.AllowMounts = []string{allowed} })
	tk := e.sh(`cat /m/marker; echo ready; until [ -e /m/go ]; do sleep 0.05; done; cat /m/go`)
	tk.Job.Spec.Mounts = []structs.Mount{{Source: s.src, Target: "/m"}}
	mustStart(t, r, tk)
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	waitFile(t, filepath.Join(dir, stdoutFile), "ready")
	stage := mountStageDir(e.allocDir, tk.Alloc.ID)
	out, err := exec.Command("docker", "inspect", "-f", "{{range .Mounts}}{{.Source}}{{end}}", containerName(tk.Alloc.ID)).CombinedOutput()
	if want := filepath.Join(realPath(t, stage), "0"); err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("the engine mounts %q (%v), want the stage's %s", out, err, want)
	}
	if _, err := os.Stat(stage); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stage %s is still there once the container started (%v)", stage, err)
	}
	if fi, err := os.Stat(filepath.Dir(stage)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the stages' directory: %v, %v; want it root's alone (0700)", fi, err)
	}
	if err := os.WriteFile(filepath.Join(s.src, "go"), []byte("went\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocSucceeded {
		t.Fatalf("ended %+v", u)
	}
	if got := readFile(t, filepath.Join(dir, stdoutFile)); got != "inside\nready\nwent\n" {
		t.Errorf("stdout %q, want the source read before and after the stage went", got)
	}
}

// TestClearMountStage_UndoesWhatADeadSupervisorLeftAndDeletesNothing: a
// supervisor that died between its bind and the container's start left
// its stage: the runner's orphan cleanup undoes the binds, and the
// source's files are all there afterwards.
func TestClearMountStage_UndoesWhatADeadSupervisorLeftAndDeletesNothing(t *testing.T) {
	e := newContainerEnv(t)
	allowed := testutil.JobDir(t)
	s := newSwapper(t, allowed)
	mounts, err := checkMounts([]structs.Mount{{Source: s.src, Target: "/m"}}, []string{allowed})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := e.d.ServerPID(t.Context())
	if err != nil || pid == 0 {
		t.Skipf("the engine's process is not to be seen from here (%d, %v): nothing is bound", pid, err)
	}
	sp := spec{AllocID: newAllocID(), Driver: containerDriverName,
		Container: &containerSpec{Socket: engine.DefaultSocket, Image: e.image}}
	dir := mountStageDir(e.allocDir, sp.AllocID)
	staged, _, err := stageMounts(mounts, dir, "/proc/"+strconv.Itoa(pid)+"/root", "", hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	// Never released, as by a supervisor that died.
	if got := readFile(t, filepath.Join(staged[0].Source, "marker")); got != "inside\n" {
		t.Fatalf("the stage holds %q, want the source", got)
	}
	if err := (containerDriver{}).killOrphan(sp, filepath.Join(e.allocDir, sp.AllocID), jobRecord{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stage %s is still there (%v)", dir, err)
	}
	if got := readFile(t, filepath.Join(s.src, "marker")); got != "inside\n" {
		t.Errorf("the source's marker holds %q after the cleanup", got)
	}
	mountinfo := readFile(t, "/proc/self/mountinfo")
	if strings.Contains(mountinfo, dir) {
		t.Errorf("the stage is still mounted:\n%s", mountinfo)
	}
}

// TestContainer_CapabilitiesAreThoseTheJobAsksAndTheNodeAllows: a job
// that names a capability its node allows has it, and no other. The
// engine (Docker) gives a job run as another account than root the
// capability only in its bounding set, never as one it may use: it makes
// no added capability ambient (moby#8460); a job an admin lets run as
// root uses it.
func TestContainer_CapabilitiesAreThoseTheJobAsksAndTheNodeAllows(t *testing.T) {
	t.Parallel()
	image := privsImage(t)
	alice := testutil.LocalUser(t)
	e := newContainerEnv(t)
	r, rec := e.runner(t, func(c *Config) { c.AllowCaps = []string{"NET_BIND_SERVICE", "NET_RAW"} })
	const netBind = "0000000000000400"
	cases := []struct {
		name      string
		owner     string
		allowRoot bool
		caps      []string
		want      map[string]string
	}{
		{name: "none asked", owner: alice.Name,
			want: map[string]string{"CapEff:": noCaps, "CapBnd:": noCaps, "NoNewPrivs:": "1"}},
		{name: "as its account: bounding only", owner: alice.Name, caps: []string{"NET_BIND_SERVICE"},
			want: map[string]string{"CapEff:": noCaps, "CapPrm:": noCaps, "CapBnd:": netBind, "NoNewPrivs:": "1"}},
		{name: "as root: exactly that one", owner: "root", allowRoot: true, caps: []string{"NET_BIND_SERVICE"},
			want: map[string]string{"Uid:": four(0), "CapEff:": netBind, "CapPrm:": netBind, "CapBnd:": netBind, "NoNewPrivs:": "1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tk := imageTask(image, "privs")
			tk.Job.Owner, tk.Job.AllowRoot, tk.Job.Spec.Caps = tc.owner, tc.allowRoot, tc.caps
			wantPrivs(t, stdoutOf(t, r, rec, e.allocDir, tk), tc.want)
		})
	}
}

// TestContainer_LimitsReachTheContainersCgroup: the spec's limits are
// the container's: its cgroup holds its memory (no swap), CPUs and
// processes to them.
func TestContainer_LimitsReachTheContainersCgroup(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, _ := e.runner(t)
	tk := e.sh(`cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null ||
		cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max`)
	sp := imageSpec(t, r, tk)
	sp.Limits = &limits{CPUs: 2, MemoryBytes: 48 << 20, PidsMax: 40}
	dir := newAllocDir(t, e.testEnv, sp)
	startSupervisor(t, dir).exitCode(t)
	if st := readStatus(t, dir); st.State != structs.AllocSucceeded {
		t.Fatalf("status = %+v", st)
	}
	out := readFile(t, filepath.Join(dir, stdoutFile))
	if out != "40\n50331648\n200000\n" && out != "40\n50331648\n200000 100000\n" {
		t.Errorf("the container's cgroup says %q, want 40 processes, 48M and 2 CPUs", out)
	}
}

// TestContainer_KilledForMemoryIsOutOfMemory: a container the kernel
// kills at its memory limit ends failed, "out of memory", with the limit
// in --mem's units.
func TestContainer_KilledForMemoryIsOutOfMemory(t *testing.T) {
	t.Parallel()
	e := newContainerEnv(t)
	r, rec := e.runner(t)
	// After a pause, so that the engine watches the container for memory
	// kills before the kill (the engine test of KilledForMemory says why).
	tk := imageTask(e.image, "sh", "-c", "sleep 1; dd if=/dev/zero of=/dev/null bs=64M count=1")
	tk.Alloc.MemoryMiB = 16
	mustStart(t, r, tk)
	u := waitTerminalWithin(t, rec, tk.Alloc.ID, time.Minute)
	if u.State != structs.AllocFailed || u.ExitCode != 137 || u.Reason != "out of memory: used 16M of its 16M limit" {
		t.Errorf("ended %+v, want failed, out of memory at 16M", u)
	}
}
