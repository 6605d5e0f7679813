package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary a small workload inside a group:
// "open PATH" opens a device node and exits 0, or 3 on EPERM, 4 on any
// other error; "alloc MIB" touches that much memory and exits 0.
const helperEnv = "SKEIN_CGROUP_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helper(h))
	}
	// internal/testutil cleans cgroups up through this package, so the
	// leak check is goleak's own here.
	goleak.VerifyTestMain(m)
}

func helper(h string) int {
	what, arg, _ := strings.Cut(h, " ")
	switch what {
	case "open":
		f, err := os.OpenFile(arg, os.O_RDWR, 0)
		switch {
		case err == nil:
			f.Close()
			return 0
		case errors.Is(err, syscall.EPERM):
			return 3
		}
		fmt.Fprintln(os.Stderr, err)
		return 4
	case "alloc":
		mib, _ := strconv.Atoi(arg)
		keep := make([][]byte, 0, mib)
		for range mib {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep), "MiB")
		return 0
	}
	return 2
}

// helperCmd is the test binary as a helper.
func helperCmd(what string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+what)
	return cmd
}

// realHierarchy is this machine's hierarchy with a parent group of the
// test's own, removed (children first) when the test ends. It skips
// where the machine has none the test may use.
func realHierarchy(t testing.TB) *Hierarchy {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root")
	}
	parent := fmt.Sprintf("skein-test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
	h, err := Detect("/proc/self/mountinfo", parent)
	if err != nil {
		t.Skipf("no cgroup hierarchy to test: %v", err)
	}
	if err := h.Prepare(); err != nil {
		t.Fatalf("prepare %s: %v", h.Describe(), err)
	}
	t.Cleanup(func() { removeTree(t, h) })
	return h
}

// removeTree removes the test's parent group and whatever groups are
// left in it, killing what they hold.
func removeTree(t testing.TB, h *Hierarchy) {
	dirs := []string{h.Dir}
	if h.Version == V1 {
		dirs = nil
		for _, d := range h.Dirs {
			dirs = append(dirs, d)
		}
	}
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				if g, err := h.Group(e.Name()); err == nil {
					_ = g.Kill()
					_ = g.Remove()
				}
			}
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove the test's parent group: %v", err)
		}
	}
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReal_MemoryLimitKillsAndCounts: a process that touches more than
// its group's memory limit is killed by the kernel, and the group counts
// the kill and its peak.
func TestReal_MemoryLimitKillsAndCounts(t *testing.T) {
	h := realHierarchy(t)
	g, err := h.Create("mem", Limits{MemoryBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd("alloc 200")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("a process touching 200 MiB under a 32 MiB limit ended %v (%v), want killed by SIGKILL", cmd.ProcessState, err)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 {
		t.Errorf("stats %+v: no OOM kill counted", st)
	}
	// The kernel may charge a page or so past the limit before it
	// reclaims or kills.
	if st.MemoryPeakBytes < 16<<20 || st.MemoryPeakBytes > 32<<20+64<<10 {
		t.Errorf("peak %d bytes, want near the 32 MiB limit and not past it by more than a few pages", st.MemoryPeakBytes)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if g.Exists() {
		t.Error("the group is still there after Remove")
	}
}

// TestReal_UnderTheLimitRunsToTheEnd: the same process under a limit it
// fits in succeeds, with nothing counted against it.
func TestReal_UnderTheLimitRunsToTheEnd(t *testing.T) {
	h := realHierarchy(t)
	g, err := h.Create("fits", Limits{MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cmd := helperCmd("alloc 64")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("64 MiB under a 256 MiB limit: %v", err)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills != 0 || st.MemoryPeakBytes < 64<<20 {
		t.Errorf("stats %+v: want no OOM kill and a peak of at least 64 MiB", st)
	}
	if st.CPU <= 0 {
		t.Errorf("stats %+v: no CPU time counted for a process that ran", st)
	}
	_ = g.Remove()
}

// mknodGPUs makes device nodes nvidia0..n-1 (NVIDIA's major, minor = the
// index) in a directory of their own.
func mknodGPUs(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("nvidia%d", i))
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(NVIDIAMajor, uint32(i)))); err != nil {
			t.Skipf("mknod %s: %v", p, err)
		}
	}
	return dir
}

// gpuOpen opens one made GPU node from inside g and says how it went: 0
// opened (or refused by the missing driver, not by the group), 3 EPERM.
func gpuOpen(t *testing.T, g *Group, dir string, i int) int {
	t.Helper()
	cmd := helperCmd(fmt.Sprintf("open %s/nvidia%d", dir, i))
	var out strings.Builder
	cmd.Stderr = &out
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if code == 4 && strings.Contains(out.String(), "no such device") {
		return 0 // the group let it through; no driver answers
	}
	if code != 0 && code != 3 {
		t.Fatalf("open nvidia%d: exit %d: %s", i, code, out.String())
	}
	return code
}

// denyAllBut is the deny list of an n-GPU node's job holding GPU keep.
func denyAllBut(n, keep int) []Device {
	var deny []Device
	for i := range n {
		if i != keep {
			deny = append(deny, Device{Major: NVIDIAMajor, Minor: uint32(i)})
		}
	}
	return deny
}

// TestReal_DeviceFilter_OneGPUOfEight: a 1-GPU job of an 8-GPU node
// opens its own GPU's node and gets EPERM on the other seven.
func TestReal_DeviceFilter_OneGPUOfEight(t *testing.T) {
	h := realHierarchy(t)
	dir := mknodGPUs(t, 8)
	g, err := h.Create("gpu", Limits{DenyDevices: denyAllBut(8, 3)})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Remove()
	for i := range 8 {
		want := 3
		if i == 3 {
			want = 0
		}
		if got := gpuOpen(t, g, dir, i); got != want {
			t.Errorf("%s group: open nvidia%d: %d, want %d (0 let through, 3 EPERM)", h.Version, i, got, want)
		}
	}
}

// TestRealV2_DeviceFilterAndCloneInto: the v2 path for real where the
// machine mounts a unified hierarchy, even one without controllers (the
// device filter needs none): a process cloned into a group with the eBPF
// filter attached gets EPERM on the denied GPUs only.
func TestRealV2_DeviceFilterAndCloneInto(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Skip(err)
	}
	mounts, err := parseMountinfo(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var root string
	for _, m := range mounts {
		if m.version == V2 {
			root = m.dir
			break
		}
	}
	if root == "" {
		t.Skip("no cgroup v2 hierarchy mounted")
	}
	g := &Group{version: V2, name: "v2test", dir: filepath.Join(root, fmt.Sprintf("skein-test-%d-v2", os.Getpid()))}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.Kill()
		if err := g.Remove(); err != nil {
			t.Error(err)
		}
	})
	if err := attachDeviceFilter(g.dir, denyAllBut(4, 1)); err != nil {
		t.Fatalf("attach the device filter: %v", err)
	}
	dir := mknodGPUs(t, 4)
	for i := range 4 {
		want := 3
		if i == 1 {
			want = 0
		}
		if got := gpuOpen(t, g, dir, i); got != want {
			t.Errorf("v2 group: open nvidia%d: %d, want %d (0 let through, 3 EPERM)", i, got, want)
		}
	}
	// The process was in the group from its start: a long one is listed.
	cmd := exec.Command("sleep", "30")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	pids, err := g.Procs()
	if err != nil || len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("group lists %v (%v), want the sleep's pid %d", pids, err, cmd.Process.Pid)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
}

// TestReal_KillTakesForkBombAndDaemons: a fork bomb stops at the
// group's process limit, and Kill empties the group, a setsid daemon
// included.
func TestReal_KillTakesForkBombAndDaemons(t *testing.T) {
	h := realHierarchy(t)
	const max = 32
	g, err := h.Create("bomb", Limits{PidsMax: max})
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command("setsid", "sleep", "1000")
	if err := g.Start(daemon); err != nil {
		t.Fatal(err)
	}
	daemonGone := make(chan struct{})
	go func() {
		_ = daemon.Wait()
		close(daemonGone)
	}()
	// Each process forks for ever, so the bomb fills the group and stays
	// at its limit; one whose processes exit once a fork fails (b | b &)
	// can die out between two looks on a busy machine.
	bomb := exec.Command("sh", "-c", "b() { while :; do b & done; }; b")
	if err := g.Start(bomb); err != nil {
		t.Fatal(err)
	}
	go func() { _ = bomb.Wait() }()
	waitUntil(t, 20*time.Second, "the fork bomb to reach the limit", func() (bool, string) {
		n, err := readInt(filepath.Join(g.dirPids(), "pids.current"))
		return n >= max-2, fmt.Sprintf("pids.current %d (%v)", n, err)
	})
	if n, _ := readInt(filepath.Join(g.dirPids(), "pids.current")); n > max {
		t.Fatalf("pids.current %d above pids.max %d", n, max)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-daemonGone:
	case <-time.After(5 * time.Second):
		t.Fatal("the setsid daemon outlived Kill")
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
}

// dirPids is the directory holding the group's pids files.
func (g *Group) dirPids() string {
	if g.version == V2 {
		return g.dir
	}
	return g.dirs["pids"]
}

// TestReal_CPUQuotaHoldsToOneCPU: two busy loops in a group limited to
// one CPU use, by the group's count, no more than one CPU's worth of the
// time they ran, however busy the machine is (a busy one gives them less,
// and the quota then has nothing to hold back).
func TestReal_CPUQuotaHoldsToOneCPU(t *testing.T) {
	h := realHierarchy(t)
	g, err := h.Create("cpu", Limits{CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.Command("sh", "-c", "while :; do :; done & while :; do :; done")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	waitUntil(t, time.Minute, "the loops to use a second of CPU", func() (bool, string) {
		st, err := g.Stats()
		return err == nil && st.CPU >= time.Second, fmt.Sprintf("%+v %v", st, err)
	})
	st, err := g.Stats()
	elapsed := time.Since(start)
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if limit := elapsed + 2*CFSPeriod; st.CPU > limit {
		t.Errorf("two busy loops used %s of CPU in %s under a 1-CPU quota (more than one CPU's worth)", st.CPU, elapsed)
	}
	_ = g.Remove()
}

// TestReal_TheParentsLimitHoldsGroupsWithoutTheirOwn: a group with no
// memory limit of its own is held to its parent's (what a node offers its
// jobs), and the parent's limit may be lowered and raised again.
func TestReal_TheParentsLimitHoldsGroupsWithoutTheirOwn(t *testing.T) {
	h := realHierarchy(t)
	for _, mib := range []int64{256, 48, 512} { // set, lower, raise
		if err := h.LimitParent(mib << 20); err != nil {
			t.Fatalf("limit the parent to %d MiB: %v", mib, err)
		}
		g, err := h.Create(fmt.Sprintf("nolimit%d", mib), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		cmd := helperCmd("alloc 100")
		if err := g.Start(cmd); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		if fits := mib > 100+32; fits != (err == nil) {
			t.Errorf("100 MiB in a group without a limit under a parent of %d MiB: %v", mib, err)
		}
		_ = g.Remove()
	}
}
