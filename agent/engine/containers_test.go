package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// callTimeout bounds each call of a test to the engine; it is loose for a
// busy machine.
const callTimeout = 2 * time.Minute

// testDocker is a client of the real engine; it skips the test where no
// engine answers.
func testDocker(t *testing.T) *Docker {
	t.Helper()
	testutil.RequireEngine(t)
	d, err := NewDocker(DefaultSocket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// uniqueName is a name no other test (or test run) uses.
func uniqueName(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// testSpec runs cmd in the busybox image under a name and alloc label of
// its own.
func testSpec(t *testing.T, cmd ...string) ContainerSpec {
	name := uniqueName("skein-engine-test")
	return ContainerSpec{
		Name:   name,
		Labels: map[string]string{LabelAlloc: name, LabelAllocDir: t.TempDir()},
		Image:  testutil.BusyboxImage(t),
		Cmd:    cmd,
	}
}

// create creates the container and removes it when the test ends.
func create(t *testing.T, d *Docker, spec ContainerSpec) string {
	t.Helper()
	id, err := d.Create(callCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Remove(context.Background(), id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return id
}

// syncBuffer is a buffer the attach stream writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// started is a created, attached and started container.
type started struct {
	id             string
	stdout, stderr *syncBuffer
	end            <-chan error
}

func start(t *testing.T, d *Docker, spec ContainerSpec) started {
	t.Helper()
	c := started{id: create(t, d, spec), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	var err error
	if c.end, err = d.Attach(callCtx(t), c.id, c.stdout, c.stderr); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(callCtx(t), c.id); err != nil {
		t.Fatal(err)
	}
	return c
}

// wait waits for the container's exit code and the end of its output.
func (c started) wait(t *testing.T, d *Docker) int {
	t.Helper()
	code, err := d.Wait(callCtx(t), c.id)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-c.end:
		if err != nil {
			t.Fatalf("attach stream ended with %v, want nil at the container's end", err)
		}
	case <-time.After(callTimeout):
		t.Fatal("the attach stream did not end with the container")
	}
	return code
}

// run runs the container to its end.
func run(t *testing.T, d *Docker, spec ContainerSpec) (stdout, stderr string, code int) {
	t.Helper()
	c := start(t, d, spec)
	code = c.wait(t, d)
	return c.stdout.String(), c.stderr.String(), code
}

func TestContainer_OutputGoesToItsStreamsAndTheExitCodeIsWaitedFor(t *testing.T) {
	d := testDocker(t)
	spec := testSpec(t, "sh", "-c", "echo out; echo err >&2; echo $GREETING in $PWD; exit 3")
	spec.Env = []string{"GREETING=hello"}
	spec.Workdir = "/bin"
	c := start(t, d, spec)
	if code := c.wait(t, d); code != 3 {
		t.Errorf("exit code = %d, want 3", code)
	}
	if got, want := c.stdout.String(), "out\nhello in /bin\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := c.stderr.String(), "err\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	st, err := d.Inspect(callCtx(t), c.id)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != c.id || st.Name != spec.Name || st.Running || st.ExitCode != 3 || st.StartedAt.IsZero() ||
		st.Labels[LabelAlloc] != spec.Labels[LabelAlloc] || st.Labels[LabelAllocDir] != spec.Labels[LabelAllocDir] {
		t.Errorf("inspect = %+v, want %s named %s, exited with 3, started, with labels %v", st, c.id, spec.Name, spec.Labels)
	}
}

func TestContainer_AttachedBeforeStartAnInstantExitLosesNoOutput(t *testing.T) {
	d := testDocker(t)
	var want strings.Builder
	want.WriteString("first\n")
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	stdout, stderr, code := run(t, d, testSpec(t, "sh", "-c", "echo first; seq 1 2000; echo last >&2"))
	if code != 0 || stdout != want.String() || stderr != "last\n" {
		t.Errorf("exit %d, stdout of %d bytes (%.40q...), stderr %q; want exit 0, all %d bytes of stdout and stderr \"last\\n\"",
			code, len(stdout), stdout, stderr, want.Len())
	}
}

func TestContainer_CreatedNotStartedInspectsAsNeverStarted(t *testing.T) {
	d := testDocker(t)
	id := create(t, d, testSpec(t, "true"))
	st, err := d.Inspect(callCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || !st.StartedAt.IsZero() {
		t.Errorf("inspect = %+v, want not running and never started", st)
	}
}

func TestSignal_TermReachesAMainProcessThatTrapsIt(t *testing.T) {
	d := testDocker(t)
	c := start(t, d, testSpec(t, "sh", "-c", `trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.1; done`))
	testutil.WaitFor(t, callTimeout, func() error {
		if !strings.Contains(c.stdout.String(), "ready") {
			return fmt.Errorf("the trap is not set yet: stdout %q", c.stdout.String())
		}
		return nil
	})
	if err := d.Signal(callCtx(t), c.id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, d); code != 7 {
		t.Errorf("exit code = %d, want 7 from the trap", code)
	}
	if got := c.stdout.String(); !strings.Contains(got, "got TERM\n") {
		t.Errorf("stdout = %q, want the trap's line", got)
	}
}

func TestSignal_TermStopsAPlainSleepThroughInit(t *testing.T) {
	// sleep as PID 1 would ignore TERM (no handler, and the kernel drops
	// it for PID 1); docker-init as PID 1 forwards it, and sleep dies of
	// it.
	d := testDocker(t)
	c := start(t, d, testSpec(t, "sleep", "1000"))
	if err := d.Signal(callCtx(t), c.id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t, d); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit code = %d, want %d: killed by TERM", code, 128+int(syscall.SIGTERM))
	}
}

func TestSignal_AnEndedContainerIsNotRunningAndAnUnknownOneIsNoContainer(t *testing.T) {
	d := testDocker(t)
	c := start(t, d, testSpec(t, "true"))
	c.wait(t, d)
	if err := d.Signal(callCtx(t), c.id, syscall.SIGTERM); !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "signal TERM to container "+c.id) {
		t.Errorf("signal of an ended container = %v, want ErrNotRunning naming the signal and container", err)
	}
	unknown := uniqueName("skein-engine-test-none")
	if err := d.Signal(callCtx(t), unknown, syscall.SIGKILL); !errors.Is(err, ErrNoContainer) {
		t.Errorf("signal of an unknown container = %v, want ErrNoContainer", err)
	}
	if err := d.Start(callCtx(t), unknown); !errors.Is(err, ErrNoContainer) {
		t.Errorf("start of an unknown container = %v, want ErrNoContainer", err)
	}
	if _, err := d.Wait(callCtx(t), unknown); !errors.Is(err, ErrNoContainer) {
		t.Errorf("wait for an unknown container = %v, want ErrNoContainer", err)
	}
	if _, err := d.Attach(callCtx(t), unknown, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, ErrNoContainer) {
		t.Errorf("attach to an unknown container = %v, want ErrNoContainer", err)
	}
}

func TestAttach_EndsWithTheContext(t *testing.T) {
	d := testDocker(t)
	id := create(t, d, testSpec(t, "sleep", "1000"))
	ctx, cancel := context.WithCancel(context.Background())
	end, err := d.Attach(ctx, id, &bytes.Buffer{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(callCtx(t), id); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-end:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("attach stream ended with %v, want context.Canceled", err)
		}
	case <-time.After(callTimeout):
		t.Fatal("the attach stream did not end with its context")
	}
	st, err := d.Inspect(callCtx(t), id)
	if err != nil || !st.Running {
		t.Errorf("inspect = %+v, %v; want the container still running: only the stream ended", st, err)
	}
}

func TestWait_EndsWithTheContext(t *testing.T) {
	d := testDocker(t)
	c := start(t, d, testSpec(t, "sleep", "1000"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Wait(ctx, c.id); !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnreachable) {
		t.Errorf("wait with an ended context = %v, want context.Canceled", err)
	}
}

func TestCreate_UserRunsAsThatUserAndGroups(t *testing.T) {
	d := testDocker(t)
	spec := testSpec(t, "sh", "-c", "id -u; id -g; id -G")
	spec.User = "65534:65534"
	spec.GroupAdd = []string{"44"}
	stdout, stderr, code := run(t, d, spec)
	if want := "65534\n65534\n65534 44\n"; code != 0 || stdout != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 0 and %q", code, stdout, stderr, want)
	}
}

func TestCreate_ReadOnlyMountCannotBeWrittenAndReadWriteCan(t *testing.T) {
	d := testDocker(t)
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "in"), []byte("input\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, "sh", "-c", "cat /ro/in; echo written >/rw/out; echo rw $?; echo no >/ro/out; echo ro $?")
	spec.Mounts = []structs.Mount{{Source: ro, Target: "/ro", ReadOnly: true}, {Source: rw, Target: "/rw"}}
	stdout, stderr, _ := run(t, d, spec)
	if want := "input\nrw 0\nro 1\n"; stdout != want || !strings.Contains(stderr, "Read-only file system") {
		t.Errorf("stdout %q, stderr %q; want %q and the read-only mount refusing the write", stdout, stderr, want)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out")); err != nil || string(b) != "written\n" {
		t.Errorf("read-write mount's file = %q, %v; want what the container wrote", b, err)
	}
	if _, err := os.Stat(filepath.Join(ro, "out")); !os.IsNotExist(err) {
		t.Errorf("read-only mount has the file the container tried to write (stat: %v)", err)
	}
}

func TestCreate_AMissingMountSourceIsAnErrorAndIsNotCreated(t *testing.T) {
	d := testDocker(t)
	missing := filepath.Join(t.TempDir(), "missing")
	spec := testSpec(t, "true")
	spec.Mounts = []structs.Mount{{Source: missing, Target: "/data"}}
	id, err := d.Create(callCtx(t), spec)
	if err == nil {
		d.Remove(context.Background(), id)
		t.Fatal("create with a missing mount source succeeded")
	}
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), spec.Name) {
		t.Errorf("error = %v, want it to name the container and the missing source", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the missing source was created (stat: %v)", err)
	}
}

func TestCreate_ShmSizeIsDevShmsSize(t *testing.T) {
	d := testDocker(t)
	spec := testSpec(t, "grep", " /dev/shm ", "/proc/mounts")
	spec.ShmSize = 96 << 20
	stdout, stderr, code := run(t, d, spec)
	if code != 0 || !strings.Contains(stdout, "size=98304k") {
		t.Errorf("exit %d, /dev/shm in /proc/mounts %q (stderr %q); want size=98304k", code, stdout, stderr)
	}
}

func TestCreate_ANameInUseIsAnErrorThatSaysSo(t *testing.T) {
	d := testDocker(t)
	spec := testSpec(t, "true")
	create(t, d, spec)
	_, err := d.Create(callCtx(t), spec)
	if !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), spec.Name) {
		t.Errorf("second create of %s = %v, want ErrNameInUse saying the name is in use", spec.Name, err)
	}
}

func TestCreate_AMissingImageIsImageNotFound(t *testing.T) {
	d := testDocker(t)
	spec := testSpec(t, "true")
	spec.Image = "skein-test-missing:does-not-exist"
	_, err := d.Create(callCtx(t), spec)
	if !errors.Is(err, ErrImageNotFound) || !strings.Contains(err.Error(), `image "skein-test-missing:does-not-exist" not found`) {
		t.Errorf("create of a missing image = %v, want ErrImageNotFound naming it", err)
	}
}

func TestCreate_HostConfigAsTheEngineHoldsIt(t *testing.T) {
	// The engine here has no GPU runtime: the device requests (and the
	// unlimited memlock that comes with GPUs, which this engine may not
	// grant) are only held, never started.
	d := testDocker(t)
	gpus := []string{"GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-7777-8888-9999-000000000000"}
	for _, tc := range []struct {
		name    string
		mode    GPUMode
		network string
		want    []container.DeviceRequest
		wantNet string
		visible string
	}{
		{name: "no GPUs", mode: GPUsNone, wantNet: "host", visible: "void"},
		{name: "nvidia", mode: GPUsNVIDIA, network: "none", wantNet: "none", visible: strings.Join(gpus, ","),
			want: []container.DeviceRequest{{Driver: "nvidia", DeviceIDs: gpus, Capabilities: [][]string{{"gpu"}}}}},
		{name: "cdi", mode: GPUsCDI, wantNet: "host", visible: strings.Join(gpus, ","),
			want: []container.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"nvidia.com/gpu=" + gpus[0], "nvidia.com/gpu=" + gpus[1]}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, "true")
			spec.GPUMode, spec.GPUs, spec.Network = tc.mode, gpus, tc.network
			// A job, or its image, asking for every GPU gets only its own.
			spec.Env = []string{"NVIDIA_VISIBLE_DEVICES=all", "KEPT=1"}
			id := create(t, d, spec)
			c, err := d.c.ContainerInspect(callCtx(t), id)
			if err != nil {
				t.Fatal(err)
			}
			h := c.HostConfig
			if h.Init == nil || !*h.Init || h.LogConfig.Type != "none" || h.AutoRemove || string(h.NetworkMode) != tc.wantNet {
				t.Errorf("init %v, log %q, auto-remove %v, network %q; want init, log none, no auto-remove, network %s",
					h.Init, h.LogConfig.Type, h.AutoRemove, h.NetworkMode, tc.wantNet)
			}
			switch {
			case tc.mode == GPUsNone && len(h.Ulimits) != 0:
				t.Errorf("ulimits = %v, want the engine's", h.Ulimits)
			case tc.mode != GPUsNone && (len(h.Ulimits) != 1 || *h.Ulimits[0] != (container.Ulimit{Name: "memlock", Soft: -1, Hard: -1})):
				t.Errorf("ulimits = %v, want memlock unlimited with GPUs", h.Ulimits)
			}
			if len(h.DeviceRequests) != len(tc.want) {
				t.Fatalf("device requests = %+v, want %+v", h.DeviceRequests, tc.want)
			}
			for i, got := range h.DeviceRequests {
				w := tc.want[i]
				if got.Driver != w.Driver || !slices.Equal(got.DeviceIDs, w.DeviceIDs) || fmt.Sprint(got.Capabilities) != fmt.Sprint(w.Capabilities) {
					t.Errorf("device request = %+v, want %+v", got, w)
				}
			}
			if c.Config.Tty || c.Config.OpenStdin {
				t.Errorf("tty %v, stdin %v; want neither", c.Config.Tty, c.Config.OpenStdin)
			}
			if !slices.Contains(c.Config.Env, "KEPT=1") || !slices.Contains(c.Config.Env, "NVIDIA_VISIBLE_DEVICES="+tc.visible) ||
				slices.Contains(c.Config.Env, "NVIDIA_VISIBLE_DEVICES=all") {
				t.Errorf("env = %q, want KEPT=1 and NVIDIA_VISIBLE_DEVICES=%s alone", c.Config.Env, tc.visible)
			}
			if h.Privileged || len(h.Devices) != 0 || len(h.DeviceCgroupRules) != 0 || !slices.Equal(h.SecurityOpt, []string{"no-new-privileges"}) ||
				!slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 {
				t.Errorf("privileged %v, devices %v, device rules %v, security %q, cap drop %q, cap add %q; "+
					"want no devices, no-new-privileges and every capability dropped",
					h.Privileged, h.Devices, h.DeviceCgroupRules, h.SecurityOpt, h.CapDrop, h.CapAdd)
			}
		})
	}
	spec := testSpec(t, "true")
	spec.GPUMode = "amd"
	if _, err := d.Create(callCtx(t), spec); err == nil || !strings.Contains(err.Error(), `GPU mode "amd"`) {
		t.Errorf("create with GPU mode amd = %v, want an error naming the mode", err)
	}
}

// TestCreate_NoPrivilegesButTheCapabilitiesAdded: even as root, a
// container has no capability but those it is given, and cannot gain
// any (no-new-privileges).
func TestCreate_NoPrivilegesButTheCapabilitiesAdded(t *testing.T) {
	d := testDocker(t)
	for _, tc := range []struct {
		name string
		add  []string
		caps string
	}{
		{name: "none", caps: "0000000000000000"},
		{name: "NET_BIND_SERVICE", add: []string{"NET_BIND_SERVICE"}, caps: "0000000000000400"},
		{name: "two", add: []string{"CHOWN", "NET_RAW"}, caps: "0000000000002001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, "sh", "-c", `grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '`)
			spec.CapAdd = tc.add
			stdout, stderr, code := run(t, d, spec)
			want := "Uid: 0 0 0 0\nCapEff: " + tc.caps + "\nCapBnd: " + tc.caps + "\nNoNewPrivs: 1\n"
			if code != 0 || stdout != want {
				t.Errorf("exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
			}
		})
	}
}

// TestCreate_LimitsReachTheContainersCgroup: the limits are in the host
// config as the engine holds it, and the container's cgroup holds them.
func TestCreate_LimitsReachTheContainersCgroup(t *testing.T) {
	d := testDocker(t)
	// Each file is read where cgroup v1 has it, or else where v2 does.
	const script = `for f in pids/pids.max:pids.max memory/memory.limit_in_bytes:memory.max cpu/cpu.cfs_quota_us:cpu.max cpuset/cpuset.cpus:cpuset.cpus.effective; do
	v1=${f%%:*}; v2=${f#*:}; cat /sys/fs/cgroup/$v1 2>/dev/null || cat /sys/fs/cgroup/$v2; done`
	for _, tc := range []struct {
		name   string
		limits Limits
		nano   int64
		cpuset string
		want   []string // the cgroup's pids, memory and CPU limits (v1 and v2 spellings)
	}{
		{name: "a CPU quota", limits: Limits{MemoryBytes: 64 << 20, CPUs: 2, Pids: 64}, nano: 2e9,
			want: []string{"64", "67108864", "200000"}},
		{name: "a CPU set", limits: Limits{MemoryBytes: 32 << 20, CPUs: 1, Cpuset: "0", Pids: 10}, cpuset: "0",
			want: []string{"10", "33554432", "-1|max 100000", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(t, "sh", "-c", script)
			spec.Limits = tc.limits
			ctr := start(t, d, spec)
			code := ctr.wait(t, d)
			c, err := d.c.ContainerInspect(callCtx(t), ctr.id)
			if err != nil {
				t.Fatal(err)
			}
			r := c.HostConfig.Resources
			if r.Memory != tc.limits.MemoryBytes || r.MemorySwap != tc.limits.MemoryBytes || r.NanoCPUs != tc.nano ||
				r.CpusetCpus != tc.cpuset || r.PidsLimit == nil || *r.PidsLimit != tc.limits.Pids {
				t.Errorf("resources: memory %d, swap %d, nano CPUs %d, cpuset %q, pids %v; want %+v with no swap",
					r.Memory, r.MemorySwap, r.NanoCPUs, r.CpusetCpus, r.PidsLimit, tc.limits)
			}
			stdout := ctr.stdout.String()
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			if code != 0 || len(lines) < len(tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, ctr.stderr.String())
			}
			for i, w := range tc.want {
				if !slices.Contains(strings.Split(w, "|"), lines[i]) && !strings.HasPrefix(lines[i], w+" ") {
					t.Errorf("cgroup file %d holds %q, want %q; all: %q", i, lines[i], w, lines)
				}
			}
		})
	}
}

// TestKilledForMemory_SaysWhenTheKernelKilledForMemory: a container that
// needs more than its memory limit is killed, and KilledForMemory says it
// was for memory; one that stays within, or kills itself with SIGKILL (the
// exit code of a kill for memory), says not.
func TestKilledForMemory_SaysWhenTheKernelKilledForMemory(t *testing.T) {
	d := testDocker(t)
	for _, tc := range []struct {
		name string
		cmd  []string
		code int
		oom  bool
	}{
		// A pause first: Docker hears of a kill for memory from a watch
		// it sets on the container once started, and a kill in the
		// container's first moments on a busy machine comes before it
		// (exit 137, no mark, no event: nothing can tell then).
		{name: "over the limit", cmd: []string{"sh", "-c", "sleep 1; dd if=/dev/zero of=/dev/null bs=64M count=1"}, code: 137, oom: true},
		{name: "within it", cmd: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1M", "count=1"}, code: 0},
		{name: "killed by itself", cmd: []string{"sh", "-c", "kill -KILL $$"}, code: 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a container that did not die for memory waits oomEventWait, twice
			spec := testSpec(t, tc.cmd...)
			spec.Limits.MemoryBytes = 16 << 20
			c := start(t, d, spec)
			if code := c.wait(t, d); code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			oom, err := d.KilledForMemory(callCtx(t), c.id)
			if err != nil || oom != tc.oom {
				t.Errorf("KilledForMemory = %v, %v; want %v", oom, err, tc.oom)
			}
			// The engine's event alone, what KilledForMemory falls back
			// on when the engine's state has no mark, says the same.
			st, err := d.Inspect(callCtx(t), c.id)
			if err != nil {
				t.Fatal(err)
			}
			if heard, err := d.heardOOM(callCtx(t), st); err != nil || heard != tc.oom {
				t.Errorf("heardOOM = %v, %v; want %v", heard, err, tc.oom)
			}
		})
	}
}

func TestGPUEnv_NamesTheContainersGPUsAlone(t *testing.T) {
	env := []string{"A=1", "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES_X=2"}
	for _, tc := range []struct {
		mode GPUMode
		gpus []string
		want string
	}{
		{GPUsNone, nil, "void"},
		{GPUsNone, []string{"GPU-1"}, "void"}, // simulated GPUs: no devices
		{GPUsNVIDIA, nil, "void"},
		{GPUsNVIDIA, []string{"GPU-1", "GPU-2"}, "GPU-1,GPU-2"},
		{GPUsCDI, []string{"GPU-1"}, "GPU-1"},
	} {
		got := gpuEnv(env, tc.mode, tc.gpus)
		want := []string{"A=1", "NVIDIA_VISIBLE_DEVICES_X=2", "NVIDIA_VISIBLE_DEVICES=" + tc.want}
		if !slices.Equal(got, want) {
			t.Errorf("gpuEnv(%s, %q) = %q, want %q", tc.mode, tc.gpus, got, want)
		}
	}
}

func TestList_FindsByLabelAndRemoveRemoves(t *testing.T) {
	d := testDocker(t)
	spec := testSpec(t, "true")
	id := create(t, d, spec)
	other := create(t, d, testSpec(t, "true"))
	ids := func(key, value string) []string {
		t.Helper()
		list, err := d.List(callCtx(t), key, value)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range list {
			if c.ID == id && (c.Name != spec.Name || c.Labels[LabelAllocDir] != spec.Labels[LabelAllocDir] || c.Running) {
				t.Errorf("listed %+v, want named %s with its labels, not running", c, spec.Name)
			}
			ids = append(ids, c.ID)
		}
		return ids
	}
	if got := ids(LabelAlloc, spec.Labels[LabelAlloc]); !slices.Equal(got, []string{id}) {
		t.Errorf("list by %s=%s = %v, want only %s", LabelAlloc, spec.Labels[LabelAlloc], got, id)
	}
	if got := ids(LabelAlloc, ""); !slices.Contains(got, id) || !slices.Contains(got, other) {
		t.Errorf("list by %s = %v, want both %s and %s", LabelAlloc, got, id, other)
	}
	if err := d.Remove(callCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(callCtx(t), id); !errors.Is(err, ErrNoContainer) {
		t.Errorf("inspect after remove = %v, want ErrNoContainer", err)
	}
	if err := d.Remove(callCtx(t), id); err != nil {
		t.Errorf("remove of a removed container = %v, want nil", err)
	}
	if got := ids(LabelAlloc, spec.Labels[LabelAlloc]); len(got) != 0 {
		t.Errorf("list after remove = %v, want none", got)
	}
	if _, err := d.List(callCtx(t), "", "x"); err == nil {
		t.Error("list by an empty label key succeeded, want an error")
	}
}

func TestRemove_KillsARunningContainer(t *testing.T) {
	d := testDocker(t)
	c := start(t, d, testSpec(t, "sleep", "1000"))
	if err := d.Remove(callCtx(t), c.id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(callCtx(t), c.id); !errors.Is(err, ErrNoContainer) {
		t.Errorf("inspect after remove = %v, want ErrNoContainer", err)
	}
}

func TestHasImage_TrueForAHeldImageFalseForAMissingOne(t *testing.T) {
	d := testDocker(t)
	tag := testutil.BusyboxImage(t)
	if ok, err := d.HasImage(callCtx(t), tag); !ok || err != nil {
		t.Errorf("HasImage(%s) = %v, %v; want true", tag, ok, err)
	}
	if ok, err := d.HasImage(callCtx(t), "skein-test-missing:does-not-exist"); ok || err != nil {
		t.Errorf("HasImage of a missing image = %v, %v; want false, nil", ok, err)
	}
}

func TestPull_WithoutARegistryTheErrorNamesTheImageAndWhy(t *testing.T) {
	// No registry answers here: the engine says it cannot reach Docker
	// Hub (or, with a network, that the repository does not exist), and
	// nothing listens at localhost:1.
	d := testDocker(t)
	for _, ref := range []string{"skein-test-missing:does-not-exist", "localhost:1/skein-test-missing:does-not-exist"} {
		called := false
		err := d.Pull(callCtx(t), ref, func(PullProgress) { called = true })
		switch {
		case err == nil:
			t.Errorf("pull %s succeeded", ref)
		case errors.Is(err, ErrUnreachable):
			t.Errorf("pull %s = %v, want the engine's answer, not unreachable: the engine answered", ref, err)
		case errors.Is(err, ErrImageNotFound):
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("image %q not found: ", ref)) {
				t.Errorf("pull %s = %q, want it to name the image and why it is not found", ref, err)
			}
		case !strings.HasPrefix(err.Error(), fmt.Sprintf("pull %q: ", ref)) || len(err.Error()) <= len(ref)+len(`pull "": `):
			t.Errorf("pull %s = %q, want it to name the image and the engine's reason", ref, err)
		}
		if called {
			t.Errorf("pull %s reported progress", ref)
		}
	}
	err := d.Pull(callCtx(t), "localhost:1/skein-test-missing:does-not-exist", nil)
	if err == nil || errors.Is(err, ErrImageNotFound) || !strings.Contains(err.Error(), "localhost:1") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("pull from localhost:1 = %v, want the engine's reason: the registry refused the connection", err)
	}
	if err := d.Pull(callCtx(t), "Not A Reference", nil); err == nil || !strings.Contains(err.Error(), `pull "Not A Reference": `) {
		t.Errorf("pull of a malformed reference = %v, want an error naming it", err)
	}
}

// fakeEngine answers the engine API's ping and image pulls on a unix
// socket, as an engine that reaches a registry would: the engine here
// has none, so the pull stream's progress and a registry's answers are
// only seen this way. pulls maps fromImage (the image's full name) to
// the answer.
func fakeEngine(t *testing.T, pulls map[string]http.HandlerFunc) *Docker {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		w.Write([]byte("OK"))
	})
	mux.HandleFunc("/v1.41/images/create", func(w http.ResponseWriter, r *http.Request) {
		h, ok := pulls[r.URL.Query().Get("fromImage")]
		if !ok {
			http.Error(w, "unexpected image", http.StatusBadRequest)
			return
		}
		h(w, r)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	d, err := NewDocker(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}
}

func TestPull_ProgressSumsTheLayersDownloads(t *testing.T) {
	stream := strings.Join([]string{
		`{"status":"Pulling from library/app","id":"1.0"}`,
		`{"status":"Already exists","progressDetail":{},"id":"base"}`,
		`{"status":"Pulling fs layer","progressDetail":{},"id":"a"}`,
		`{"status":"Pulling fs layer","progressDetail":{},"id":"b"}`,
		`{"status":"Downloading","progressDetail":{"current":40,"total":100},"id":"a"}`,
		`{"status":"Downloading","progressDetail":{"current":100,"total":300},"id":"b"}`,
		`{"status":"Verifying Checksum","progressDetail":{},"id":"a"}`,
		`{"status":"Download complete","progressDetail":{},"id":"a"}`,
		`{"status":"Extracting","progressDetail":{"current":5000,"total":9000},"id":"a"}`,
		`{"status":"Pull complete","progressDetail":{},"id":"a"}`,
		`{"status":"Downloading","progressDetail":{"current":250,"total":300},"id":"b"}`,
		`{"status":"Download complete","progressDetail":{},"id":"b"}`,
		`{"status":"Extracting","progressDetail":{"current":1,"total":7},"id":"b"}`,
		`{"status":"Pull complete","progressDetail":{},"id":"b"}`,
		`{"status":"Digest: sha256:0123"}`,
		`{"status":"Status: Downloaded newer image for app:1.0"}`,
	}, "\r\n")
	d := fakeEngine(t, map[string]http.HandlerFunc{"docker.io/library/app": answer(http.StatusOK, stream)})
	var got []PullProgress
	if err := d.Pull(callCtx(t), "app:1.0", func(p PullProgress) { got = append(got, p) }); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[len(got)-1] != (PullProgress{Bytes: 400, Total: 400}) {
		t.Fatalf("progress = %+v, want it to end at 400 of 400 bytes (layers a and b; extraction not counted)", got)
	}
	for i, p := range got {
		if p.Bytes > p.Total || (i > 0 && p.Bytes < got[i-1].Bytes) {
			t.Errorf("progress = %+v, want bytes growing and never above the total", got)
		}
	}
}

func TestPull_ARegistrysMissingImageIsImageNotFoundAndOtherErrorsAreTheEnginesWords(t *testing.T) {
	d := fakeEngine(t, map[string]http.HandlerFunc{
		"docker.io/library/app": answer(http.StatusNotFound, `{"message":"manifest for app:9.9 not found: manifest unknown: manifest unknown"}`),
		"docker.io/private/app": answer(http.StatusNotFound, `{"message":"pull access denied for private/app, repository does not exist or may require 'docker login': denied: requested access to the resource is denied"}`),
		"docker.io/gone/app": answer(http.StatusOK, `{"status":"Pulling from gone/app","id":"1"}`+"\n"+
			`{"errorDetail":{"message":"manifest unknown: manifest unknown"},"error":"manifest unknown: manifest unknown"}`),
		"docker.io/flaky/app": answer(http.StatusOK, `{"status":"Downloading","progressDetail":{"current":1,"total":2},"id":"a"}`+"\n"+
			`{"errorDetail":{"message":"read tcp 10.0.0.1:4242-\u003e10.0.0.2:443: read: connection reset by peer"},"error":"read tcp: connection reset by peer"}`),
		"docker.io/full/app": answer(http.StatusInternalServerError, `{"message":"write /var/lib/docker/tmp/x: no space left on device"}`),
	})
	for _, tc := range []struct {
		ref, want string
		missing   bool
	}{
		{"app:9.9", `image "app:9.9" not found: manifest for app:9.9 not found: manifest unknown: manifest unknown`, true},
		{"private/app:1", `image "private/app:1" not found: pull access denied for private/app, repository does not exist`, true},
		{"gone/app:1", `image "gone/app:1" not found: manifest unknown`, true},
		{"flaky/app:1", `pull "flaky/app:1": read tcp 10.0.0.1:4242->10.0.0.2:443: read: connection reset by peer`, false},
		{"full/app:1", `pull "full/app:1": Error response from daemon: write /var/lib/docker/tmp/x: no space left on device`, false},
	} {
		err := d.Pull(callCtx(t), tc.ref, nil)
		if err == nil || errors.Is(err, ErrImageNotFound) != tc.missing || !strings.HasPrefix(err.Error(), tc.want) || errors.Is(err, ErrUnreachable) {
			t.Errorf("pull %s = %v, want %q (image not found: %v)", tc.ref, err, tc.want, tc.missing)
		}
	}
}

func TestPull_EndsWithTheContext(t *testing.T) {
	// An engine that starts a pull and never finishes it.
	d := fakeEngine(t, map[string]http.HandlerFunc{"docker.io/slow/app": func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"status":"Pulling from slow/app","id":"1"}` + "\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Pull(ctx, "slow/app:1", nil) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("pull = %v, want context.Canceled", err)
		}
	case <-time.After(callTimeout):
		t.Fatal("pull did not end with its context")
	}
}

func TestImages_NewestFirstWithinTheLimit(t *testing.T) {
	d := testDocker(t)
	base := testutil.BusyboxImage(t)
	// A commit of a container is an image newer than the base image.
	id := create(t, d, testSpec(t, "true"))
	newer := uniqueName("skein-engine-test-image") + ":v1"
	if _, err := d.c.ContainerCommit(callCtx(t), id, container.CommitOptions{Reference: newer}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.c.ImageRemove(context.Background(), newer, image.RemoveOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	refs, err := d.Images(callCtx(t), 1000)
	if err != nil {
		t.Fatal(err)
	}
	in, ib := slices.Index(refs, newer), slices.Index(refs, base)
	if in < 0 || ib < 0 || in > ib {
		t.Errorf("images = %v, want %s before %s", refs, newer, base)
	}
	for _, r := range refs {
		if r == "<none>:<none>" || len(r) > structs.MaxImageRefLen {
			t.Errorf("images has %q", r)
		}
	}
	if refs, err := d.Images(callCtx(t), 1); err != nil || len(refs) != 1 {
		t.Errorf("images within 1 = %v, %v; want one", refs, err)
	}
	probe := d.Probe(context.Background())
	if len(probe.Images) == 0 || len(probe.Images) > structs.MaxEngineImages {
		t.Errorf("probe's images = %v, want some and at most %d", probe.Images, structs.MaxEngineImages)
	}
}

func TestContainerOps_NothingListeningIsUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	d, err := NewDocker(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := callCtx(t)
	want := "engine unreachable at unix://" + sock
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s = %v, want ErrUnreachable saying %q", what, err, want)
		}
	}
	_, err = d.HasImage(ctx, "x:y")
	check("HasImage", err)
	_, err = d.Create(ctx, ContainerSpec{Name: "x", Image: "x:y"})
	check("Create", err)
	check("Pull", d.Pull(ctx, "x:y", nil))
	_, err = d.Images(ctx, 1)
	check("Images", err)
	_, err = d.Attach(ctx, "x", &bytes.Buffer{}, &bytes.Buffer{})
	check("Attach", err)
	check("Start", d.Start(ctx, "x"))
	_, err = d.Wait(ctx, "x")
	check("Wait", err)
	check("Signal", d.Signal(ctx, "x", syscall.SIGTERM))
	_, err = d.Inspect(ctx, "x")
	check("Inspect", err)
	check("Remove", d.Remove(ctx, "x"))
	_, err = d.List(ctx, LabelAlloc, "")
	check("List", err)
}

func TestContainerOps_ASilentEngineIsUnreachableWhenTheDeadlinePasses(t *testing.T) {
	sock := silentEngine(t)
	d, err := NewDocker(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = d.Create(ctx, ContainerSpec{Name: "x", Image: "x:y"})
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "engine unreachable at unix://"+sock) {
		t.Errorf("create = %v, want ErrUnreachable for the deadline that passed", err)
	}
}

// TestContainer_NestedInAHostContainerSharesItsFate puts a container
// inside another, as an agent that runs in a container does with its
// jobs: it sees the host container's processes, sits in its cgroup where
// the engine manages cgroups itself, and dies with it.
func TestContainer_NestedInAHostContainerSharesItsFate(t *testing.T) {
	d := testDocker(t)
	outerSpec := testSpec(t, "sleep", "1000")
	outer := start(t, d, outerSpec)
	spec := testSpec(t, "sh", "-c", "ps -o comm; echo listed; sleep 1000")
	spec.Host = outerSpec.Name
	inner := start(t, d, spec)
	testutil.WaitFor(t, 30*time.Second, func() error {
		if out := inner.stdout.String(); !strings.Contains(out, "listed") {
			return fmt.Errorf("inner container printed %q so far", out)
		}
		return nil
	})
	if out := inner.stdout.String(); !strings.Contains(out, "sleep") {
		t.Errorf("the nested container sees processes %q, want the host container's sleep among them", out)
	}
	got, err := d.c.ContainerInspect(callCtx(t), inner.id)
	if err != nil {
		t.Fatal(err)
	}
	h := got.HostConfig
	if string(h.PidMode) != "container:"+outer.id || string(h.NetworkMode) != "container:"+outer.id {
		t.Errorf("pid mode %q, network %q; want both container:%s", h.PidMode, h.NetworkMode, outer.id)
	}
	info, err := d.c.Info(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.CgroupDriver == "cgroupfs" && !strings.HasSuffix(h.CgroupParent, "/"+outer.id) {
		t.Errorf("cgroup parent %q, want the host container's cgroup", h.CgroupParent)
	}
	if err := d.Signal(callCtx(t), outer.id, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := inner.wait(t, d); code != 137 {
		t.Errorf("the nested container ended with %d when its host was killed, want 137 (killed)", code)
	}
	outer.wait(t, d)

	spec = testSpec(t, "true")
	spec.Host = outerSpec.Name
	if _, err := d.Create(callCtx(t), spec); !errors.Is(err, ErrNotRunning) {
		t.Errorf("create inside a stopped host container: %v, want ErrNotRunning", err)
	}
	spec.Host = uniqueName("skein-engine-test-none")
	if _, err := d.Create(callCtx(t), spec); !errors.Is(err, ErrNoContainer) {
		t.Errorf("create inside a host container that does not exist: %v, want ErrNoContainer", err)
	}
}
