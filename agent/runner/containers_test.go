package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/structs"
)

// Tests of jobs in containers that need no engine: what the runner
// decides and writes, and the supervisor's part, through the fake driver.

func TestContainerExit_ASignalOnlyWhenTheSupervisorSentIt(t *testing.T) {
	sent := map[syscall.Signal]bool{syscall.SIGTERM: true, syscall.SIGUSR1: true}
	cases := []struct {
		name string
		code int
		sent map[syscall.Signal]bool
		want exit
	}{
		{name: "a clean exit is its code", code: 0, sent: sent, want: exit{Code: 0}},
		{name: "a failure is its code", code: 3, sent: sent, want: exit{Code: 3}},
		{name: "128+TERM after a TERM is death by TERM", code: 128 + 15, sent: sent, want: exit{Signal: syscall.SIGTERM}},
		{name: "128+USR1 after a USR1 is death by USR1", code: 128 + 10, sent: sent, want: exit{Signal: syscall.SIGUSR1}},
		{name: "128+KILL without a KILL is the job's own code", code: 128 + 9, sent: sent, want: exit{Code: 137}},
		{name: "128+TERM without any signal is the job's own code", code: 143, sent: nil, want: exit{Code: 143}},
		{name: "128 itself is a code", code: 128, sent: map[syscall.Signal]bool{0: true}, want: exit{Code: 128}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := containerExit(tc.code, tc.sent); got != tc.want {
				t.Errorf("containerExit(%d) = %+v, want %+v", tc.code, got, tc.want)
			}
		})
	}
}

func TestCheckMounts_SourcesMustLieUnderAnAllowedDirectoryWithoutALink(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	for _, d := range []string{filepath.Join(data, "set"), filepath.Join(root, "data2"), filepath.Join(root, "etc"),
		filepath.Join(root, "real", "scratch")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "file"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(data, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link under an allowed directory that leads out of it, one that
	// stays inside, and an allowed directory that is itself a link (the
	// node's choice, resolved when the runner checks).
	if err := os.Symlink(filepath.Join(root, "etc"), filepath.Join(data, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(data, "set"), filepath.Join(data, "in")); err != nil {
		t.Fatal(err)
	}
	scratch := filepath.Join(root, "scratch")
	if err := os.Symlink(filepath.Join(root, "real", "scratch"), scratch); err != nil {
		t.Fatal(err)
	}
	allow := []string{data, scratch + "/"}
	cases := []struct {
		name    string
		mount   structs.Mount
		allow   []string
		want    containerMount // when allowed
		refused string         // part of the error, "" for none
	}{
		{name: "the allowed directory itself", mount: structs.Mount{Source: data, Target: "/data"}, allow: allow,
			want: containerMount{Source: data, Dir: data, Target: "/data"}},
		{name: "below it, read-only kept", mount: structs.Mount{Source: data + "/set", Target: "/set", ReadOnly: true},
			allow: allow, want: containerMount{Source: data + "/set", Dir: data, Path: "set", Target: "/set", ReadOnly: true}},
		{name: "a plain file", mount: structs.Mount{Source: data + "/file", Target: "/f"},
			allow: allow, want: containerMount{Source: data + "/file", Dir: data, Path: "file", Target: "/f"}},
		{name: "under an allowed directory that is a link", mount: structs.Mount{Source: scratch, Target: "/s"},
			allow: allow, want: containerMount{Source: scratch, Dir: filepath.Join(root, "real", "scratch"), Target: "/s"}},
		{name: "a link that stays inside is refused", mount: structs.Mount{Source: data + "/in", Target: "/in"},
			allow: allow, refused: data + "/in is a symbolic link: a mount's source is never reached through one"},
		{name: "a link leading out is refused", mount: structs.Mount{Source: data + "/out", Target: "/o"},
			allow: allow, refused: data + "/out is a symbolic link"},
		{name: "a path through a link is refused", mount: structs.Mount{Source: data + "/in/x", Target: "/o"},
			allow: allow, refused: data + "/in is a symbolic link"},
		{name: "a path through a file is refused", mount: structs.Mount{Source: data + "/file/x", Target: "/o"},
			allow: allow, refused: data + "/file: not a directory"},
		{name: "a fifo is refused", mount: structs.Mount{Source: data + "/fifo", Target: "/o"},
			allow: allow, refused: data + "/fifo is neither a directory nor a plain file"},
		{name: "a sibling sharing the prefix is refused", mount: structs.Mount{Source: data + "2", Target: "/d"},
			allow: allow, refused: data + "2 is not under an allowed directory"},
		{name: "dot-dot out of it is refused", mount: structs.Mount{Source: data + "/../etc", Target: "/etc"},
			allow: allow, refused: filepath.Join(root, "etc") + " is not under an allowed directory"},
		{name: "a relative source is refused", mount: structs.Mount{Source: "data", Target: "/d"},
			allow: allow, refused: "not an absolute path"},
		{name: "a missing source is refused", mount: structs.Mount{Source: data + "/nope", Target: "/n"},
			allow: allow, refused: data + "/nope: no such file or directory"},
		{name: "a missing allowed directory is refused", mount: structs.Mount{Source: root + "/gone/x", Target: "/n"},
			allow: []string{root + "/gone"}, refused: "allowed directory " + root + "/gone: no such file or directory"},
		{name: "nothing is allowed without allowed directories", mount: structs.Mount{Source: data, Target: "/d"},
			refused: "none: this node allows no mounts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkMounts([]structs.Mount{tc.mount}, tc.allow)
			if tc.refused != "" {
				if !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), tc.refused) ||
					!strings.Contains(err.Error(), tc.mount.String()) {
					t.Fatalf("checkMounts = %+v, %v; want %v naming %s and saying %q", got, err, ErrMountRefused,
						tc.mount.String(), tc.refused)
				}
				if len(tc.allow) > 0 && !strings.Contains(err.Error(), strings.Join(tc.allow, ", ")) {
					t.Errorf("error %q does not list the allowed directories", err)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0] != tc.want {
				t.Fatalf("checkMounts = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestOpenMount_RefusesAMountWithoutItsAllowedDirectory: a spec.json of
// an agent from before mounts were checked this way has its sources, not
// their allowed directories: such a mount is never taken for /.
func TestOpenMount_RefusesAMountWithoutItsAllowedDirectory(t *testing.T) {
	for _, m := range []containerMount{{Source: "/data", Target: "/d"}, {Dir: "data"}, {Dir: "/data/"}, {Dir: "/", Path: "/etc"},
		{Dir: "/", Path: "etc/../root"}, {Dir: "/", Path: "etc/"}} {
		if fd, _, err := openMount(m); err == nil || !strings.Contains(err.Error(), "names no allowed directory") {
			_ = syscall.Close(fd)
			t.Errorf("openMount(%+v) = %v, want it refused", m, err)
		}
	}
}

// TestOpenMount_SaysWhereAUserMaySwapTheSource: a source is swappable
// where a directory on its way lets someone other than root replace the
// next step: a directory of another owner, or one others may write,
// unless it is sticky and the step root's.
func TestOpenMount_SaysWhereAUserMaySwapTheSource(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test gives files to another owner")
	}
	root := t.TempDir()
	mk := func(rel string, mode os.FileMode, uid int) string {
		p := filepath.Join(root, rel)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	safe := mk("safe", 0o755, 0)
	mk("safe/x", 0o755, 0)
	users := mk("users", 0o755, 1000)
	mk("users/x", 0o755, 0)
	open := mk("open", 0o777, 0)
	mk("open/x", 0o755, 0)
	sticky := mk("sticky", 0o777|os.ModeSticky, 0)
	mk("sticky/root", 0o755, 0)
	mk("sticky/user", 0o755, 1000)
	mk("sticky/root/x", 0o755, 0)
	group := mk("group", 0o775, 0)
	mk("group/x", 0o755, 0)
	for _, tc := range []struct {
		dir, path, want string
	}{
		{safe, "x", ""},
		{safe, "", ""},
		{users, "x", users + " lets a user replace " + users + "/x"},
		{open, "x", open + " lets a user replace " + open + "/x"},
		{sticky, "root/x", ""},
		{sticky, "user", sticky + " lets a user replace " + sticky + "/user"},
		{group, "x", group + " lets a user replace " + group + "/x"},
	} {
		fd, got, err := openMount(containerMount{Dir: tc.dir, Path: tc.path})
		if err != nil {
			t.Fatalf("openMount(%s, %s): %v", tc.dir, tc.path, err)
		}
		_ = syscall.Close(fd)
		if got != tc.want {
			t.Errorf("openMount(%s, %s) says %q, want %q", tc.dir, tc.path, got, tc.want)
		}
	}
}

func TestContainerBaseEnv_LeavesTheImagesPathAndHome(t *testing.T) {
	a := Account{Name: "alice", UID: 1000, GID: 1000, Home: "/home/alice", Shell: "/bin/bash"}
	got := containerBaseEnv(a, []string{"LANG", "NVIDIA_*"}, []string{"PATH=/agent/bin", "HOME=/root", "LANG=C.UTF-8",
		"NVIDIA_DRIVER_CAPABILITIES=all", "SKEIN_TOKEN=secret"})
	want := []string{"USER=alice", "LOGNAME=alice", "LANG=C.UTF-8", "NVIDIA_DRIVER_CAPABILITIES=all"}
	if !slices.Equal(got, want) {
		t.Errorf("containerBaseEnv = %q, want %q", got, want)
	}
}

func TestNew_RefusesBadContainerSettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "allocs")
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{name: "a relative allowed mount", cfg: Config{AllocDir: dir, AllowMounts: []string{"/data", "data"}}, want: ErrAllowMount},
		{name: "a socket that is no path", cfg: Config{AllocDir: dir, ContainerSocket: "tcp://engine:2375"}, want: engine.ErrBadSocket},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); !errors.Is(err, tc.want) {
				t.Errorf("New = %v, want %v", err, tc.want)
			}
		})
	}
}

// imageTask is a task that runs argv in image.
func imageTask(image string, argv ...string) Task {
	tk := task(argv...)
	tk.Job.Spec.Image = image
	return tk
}

func TestRunner_ImageTaskWithoutAnEngineFailsToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, rec := e.runner(t)
	tk := imageTask("busybox:1", "true")
	err := r.Start(tk)
	if !errors.Is(err, ErrNoEngine) || !strings.Contains(err.Error(), "busybox:1") {
		t.Fatalf("Start = %v, want %v naming the image", err, ErrNoEngine)
	}
	dir := filepath.Join(e.allocDir, tk.Alloc.ID)
	if st := readStatus(t, dir); st.State != structs.AllocFailed || !strings.Contains(st.Reason, ErrNoEngine.Error()) {
		t.Errorf("status = %+v, want a start failure for the missing engine", st)
	}
	if _, err := os.Stat(filepath.Join(dir, supervisorPIDFile)); err == nil || tracked(r, tk.Alloc.ID) || rec.String() != "[]" {
		t.Errorf("a task that cannot start left a supervisor (%v), tracking or reports %s", err, rec)
	}
}

func TestRunner_MountOutsideTheAllowedDirectoriesFailsToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	allowed := t.TempDir()
	r, _ := e.runner(t, func(c *Config) {
		c.ContainerSocket = filepath.Join(t.TempDir(), "no-engine.sock")
		c.AllowMounts = []string{allowed}
	})
	tk := imageTask("busybox:1", "true")
	tk.Job.Spec.Mounts = []structs.Mount{{Source: allowed, Target: "/ok"}, {Source: "/etc", Target: "/etc", ReadOnly: true}}
	err := r.Start(tk)
	if !errors.Is(err, ErrMountRefused) || !strings.Contains(err.Error(), "/etc:/etc:ro") || !strings.Contains(err.Error(), allowed) {
		t.Fatalf("Start = %v, want %v naming /etc:/etc:ro and %s", err, ErrMountRefused, allowed)
	}
	if st := readStatus(t, filepath.Join(e.allocDir, tk.Alloc.ID)); st.State != structs.AllocFailed ||
		!strings.Contains(st.Reason, "/etc:/etc:ro") {
		t.Errorf("status = %+v, want the start failure naming the mount", st)
	}
}

// TestRunner_CapabilityTheNodeDoesNotAllowFailsToStart: the node's own
// check of a job's capabilities, in words that name what it allows.
func TestRunner_CapabilityTheNodeDoesNotAllowFailsToStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	socket := filepath.Join(t.TempDir(), "no-engine.sock")
	for _, tc := range []struct {
		name  string
		allow []string
		want  string
	}{
		{name: "a node that allows none", want: "capability refused: NET_RAW is not allowed on this node (skein agent --allow-cap; it allows none)"},
		{name: "a node that allows others", allow: []string{"cap_net_raw", "NET_BIND_SERVICE"},
			want: "capability refused: NET_ADMIN is not allowed on this node (skein agent --allow-cap; it allows NET_RAW, NET_BIND_SERVICE)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := e.runner(t, func(c *Config) { c.ContainerSocket, c.AllowCaps = socket, tc.allow })
			tk := imageTask("busybox:1", "true")
			tk.Job.Spec.Caps = []string{"NET_RAW", "NET_ADMIN"}
			if err := r.Start(tk); !errors.Is(err, ErrCapRefused) || !strings.HasSuffix(err.Error(), ": "+tc.want) {
				t.Fatalf("Start = %v, want %q", err, tc.want)
			}
			if st := readStatus(t, filepath.Join(e.allocDir, tk.Alloc.ID)); st.State != structs.AllocFailed || !strings.Contains(st.Reason, tc.want) {
				t.Errorf("status = %+v, want the start failure naming the capability", st)
			}
		})
	}
	if _, err := New(Config{AllocDir: e.allocDir, AllowCaps: []string{"NET_RAW", "EVERYTHING"}}); !errors.Is(err, ErrAllowCap) ||
		!strings.Contains(err.Error(), `"EVERYTHING" is not a Linux capability`) {
		t.Errorf("New with an unknown allowed capability = %v, want %v naming it", err, ErrAllowCap)
	}
}

// TestRunner_ImageTaskSpecNamesTheContainerDriver: everything the
// supervisor needs to run a container is resolved into spec.json: the
// engine, the image and policy, the checked mounts, the shm size, the
// GPUs, the network and the account by number; the environment is the
// job's without the host's PATH, HOME and SHELL, and no work/ is made.
// An engine that does not answer fails the start in words.
func TestRunner_ImageTaskSpecNamesTheContainerDriver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	allowed := t.TempDir()
	socket := "unix://" + filepath.Join(t.TempDir(), "no-engine.sock")
	r, rec := e.runner(t, func(c *Config) {
		c.ContainerSocket = socket
		c.AllowMounts = []string{allowed}
		c.DefaultShmSize = 64 << 20
		c.ContainerGPUs = engine.GPUsNVIDIA
		c.KeepFailed = true
	})
	cases := []struct {
		name    string
		shmMiB  structs.SizeMiB
		wantShm int64
		pull    structs.PullPolicy
		workdir string
	}{
		{name: "the node's defaults", wantShm: 64 << 20, pull: structs.PullIfNotPresent},
		{name: "the job's own", shmMiB: 2048, wantShm: 2 << 30, pull: structs.PullNever, workdir: "/scratch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tk := imageTask("busybox:1", "sh", "-c", "true")
			tk.Alloc.GPUs = []string{"GPU-aaaa", "GPU-bbbb"}
			tk.Job.Spec.ShmSizeMiB = tc.shmMiB
			tk.Job.Spec.ImagePull = tc.pull
			tk.Job.Spec.Workdir = tc.workdir
			tk.Job.Spec.Env = map[string]string{"MY_VAR": "mine"}
			tk.Job.Spec.Mounts = []structs.Mount{{Source: allowed, Target: "/data", ReadOnly: true}}
			mustStart(t, r, tk)
			// There is no engine there, and the start says so.
			if u := waitTerminal(t, rec, tk.Alloc.ID); u.State != structs.AllocFailed ||
				!strings.Contains(u.Reason, engine.ErrUnreachable.Error()+" at "+socket) {
				t.Errorf("ended %+v, want a start failure saying the engine at %s is unreachable", u, socket)
			}
			dir := filepath.Join(e.allocDir, tk.Alloc.ID)
			var sp spec
			if found, err := readJSON(filepath.Join(dir, specFile), &sp); !found || err != nil {
				t.Fatalf("read spec: %v, %v", found, err)
			}
			nobody := jobUser(t)
			c := sp.Container
			if sp.Driver != containerDriverName || c == nil {
				t.Fatalf("spec = %+v, want the container driver with its section", sp)
			}
			want := containerSpec{Socket: socket, Image: "busybox:1", Pull: tc.pull,
				Mounts: []containerMount{{Source: allowed, Dir: allowed, Target: "/data", ReadOnly: true}}, ShmSize: tc.wantShm,
				GPUs: tk.Alloc.GPUs, GPUMode: engine.GPUsNVIDIA, KeepFailed: true,
				User: fmt.Sprintf("%d:%d", nobody.UID, nobody.GID), Groups: c.Groups}
			if !reflect.DeepEqual(*c, want) {
				t.Errorf("container section = %+v, want %+v", *c, want)
			}
			if slices.Contains(c.Groups, fmt.Sprint(nobody.GID)) {
				t.Errorf("groups %v repeat the primary group %d", c.Groups, nobody.GID)
			}
			if sp.Workdir != tc.workdir {
				t.Errorf("workdir %q, want %q (the image's when the job names none)", sp.Workdir, tc.workdir)
			}
			env := envMap(t, sp.Env)
			for _, k := range []string{"PATH", "HOME", "SHELL"} {
				if v, ok := env[k]; ok {
					t.Errorf("a container job gets the host's %s=%q", k, v)
				}
			}
			for k, v := range map[string]string{"MY_VAR": "mine", "USER": nobody.Name, "LC_TEST": "agent",
				"CUDA_VISIBLE_DEVICES": "GPU-aaaa,GPU-bbbb", "SKEIN_ALLOC_ID": tk.Alloc.ID} {
				if env[k] != v {
					t.Errorf("env %s=%q, want %q", k, env[k], v)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, workDirName)); err == nil {
				t.Error("work/ made for a container job")
			}
		})
	}
}

// waitPullStarted waits for the supervisor of dir to write pull.json.
func waitPullStarted(t *testing.T, dir string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the pull to start", func() (bool, string) {
		_, err := os.Stat(filepath.Join(dir, pullFile))
		return err == nil, errString(err)
	})
}

// TestRunner_ReportsPullProgressWhilePending: while the supervisor pulls,
// the runner reports the allocation pending with the pull's progress when
// it changed, at most once per pullReportInterval, and then running.
func TestRunner_ReportsPullProgressWhilePending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	work := t.TempDir()
	dir := newAllocDir(t, e, spec{Driver: fakeDriverName, Argv: []string{fakePulling}, Workdir: work,
		KillGrace: structs.Duration(time.Hour)})
	id := filepath.Base(dir)
	startSupervisor(t, dir)
	waitPullStarted(t, dir)

	var mu sync.Mutex
	var at []time.Time
	rec := &recorder{}
	r, _ := e.runner(t, func(c *Config) {
		c.Report = func(u structs.AllocUpdate) {
			if u.State == structs.AllocPending {
				mu.Lock()
				at = append(at, time.Now())
				mu.Unlock()
			}
			rec.add(u)
		}
	})
	if _, err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "three pull reports", func() (bool, string) {
		return rec.count(id, structs.AllocPending) >= 3, rec.String()
	})
	var last int64
	for _, u := range rec.of(id) {
		if u.State != structs.AllocPending {
			t.Fatalf("reported %+v before the pull was over", u)
		}
		if u.Pull == nil || u.Pull.Image != "fake:pulled" || u.Pull.Bytes > 0 && u.Pull.Total != 1<<20 ||
			u.Pull.Bytes < last || u.At.IsZero() {
			t.Fatalf("pending report %+v, want the pull's growing progress", u)
		}
		last = u.Pull.Bytes
	}
	mu.Lock()
	for i := 1; i < len(at); i++ {
		// The report goes out right after the runner notes its time.
		if gap := at[i].Sub(at[i-1]); gap < pullReportInterval-250*time.Millisecond {
			t.Errorf("pull reports %s apart, want at most one per %s", gap, pullReportInterval)
		}
	}
	mu.Unlock()
	fi, err := os.Stat(filepath.Join(dir, pullFile))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("pull.json %v (%v), want 0600 and the supervisor's", fi.Mode(), err)
	}

	if err := os.WriteFile(filepath.Join(work, fakeRelease), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitState(t, rec, id, structs.AllocRunning)
	r.Stop(id, "done")
	if u := waitTerminal(t, rec, id); u.State != structs.AllocKilled {
		t.Errorf("ended %+v, want killed", u)
	}
}

// TestSupervisor_StopDuringAPullCancelsIt: a job stopped while its image
// is pulled, or fenced then, never starts; it is recorded killed.
func TestSupervisor_StopDuringAPullCancelsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	leasePath := filepath.Join(t.TempDir(), "lease.json")
	if err := writeJSONAtomic(leasePath, lease{ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		act    func(t *testing.T, p *supervisorProc)
		reason string
	}{
		{name: "a stop request", reason: "killed: cancelled by user", act: func(t *testing.T, p *supervisorProc) {
			if err := writeJSONAtomic(filepath.Join(p.dir, stopFile), stopRequest{Reason: "cancelled by user"}); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "an expired lease", reason: "killed: " + fencedReason, act: func(t *testing.T, p *supervisorProc) {
			if err := writeJSONAtomic(leasePath, lease{ExpiresAt: time.Now().Add(-time.Second)}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := newAllocDir(t, e, spec{Driver: fakeDriverName, Argv: []string{fakePulling}, Workdir: t.TempDir(),
				KillGrace: structs.Duration(time.Hour), LeasePath: leasePath})
			p := startSupervisor(t, dir)
			waitPullStarted(t, dir)
			tc.act(t, p)
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("supervisor exited %d", code)
			}
			if st := readStatus(t, dir); st.State != structs.AllocKilled || st.Reason != tc.reason {
				t.Errorf("status = %+v, want killed: %q", st, tc.reason)
			}
			if _, err := os.Stat(filepath.Join(dir, jobPIDFile)); err == nil {
				t.Error("job.pid written for a job stopped before it started")
			}
		})
	}
}

// TestSupervisor_StopDuringAStartThatCannotBeCancelledStopsTheJob: a stop
// that comes while the driver starts the job, and does not cancel the
// start, reaches the job once it has started.
func TestSupervisor_StopDuringAStartThatCannotBeCancelledStopsTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	work := t.TempDir()
	dir := newAllocDir(t, e, spec{Driver: fakeDriverName, Argv: []string{fakeSlowStart}, Workdir: work,
		KillGrace: structs.Duration(time.Hour)})
	p := startSupervisor(t, dir)
	waitPullStarted(t, dir)
	if err := writeJSONAtomic(filepath.Join(dir, stopFile), stopRequest{Reason: "cancelled by user"}); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, fakeRelease), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("supervisor exited %d", code)
	}
	st := readStatus(t, dir)
	if st.State != structs.AllocKilled || st.Reason != "killed: cancelled by user" || st.Signal != "SIGTERM" {
		t.Errorf("status = %+v, want the started job killed by SIGTERM for the stop", st)
	}
	if got := readFile(t, filepath.Join(dir, stdoutFile)); got != "SIGTERM\n" {
		t.Errorf("the job got signals %q, want one SIGTERM", got)
	}
}

// BenchmarkStageMounts is what a supervisor adds to a container's start
// for one mount: open the source from / without a link, bind it in the
// stage (checked through a root directory in /proc, here its own), and
// undo the bind.
func BenchmarkStageMounts(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root: the stage is a bind mount")
	}
	src := filepath.Join(b.TempDir(), "data", "set")
	if err := os.MkdirAll(src, 0o755); err != nil {
		b.Fatal(err)
	}
	mounts, err := checkMounts([]structs.Mount{{Source: src, Target: "/m"}}, []string{filepath.Dir(src)})
	if err != nil {
		b.Fatal(err)
	}
	dir := mountStageDir(b.TempDir(), "alloc")
	b.ResetTimer()
	for b.Loop() {
		staged, stage, err := stageMounts(mounts, dir, "/proc/self/root", "", hclog.NewNullLogger())
		if err != nil || !strings.HasPrefix(staged[0].Source, dir) {
			b.Fatalf("stageMounts = %+v, %v; want the source bound in %s", staged, err, dir)
		}
		stage.release()
	}
}
