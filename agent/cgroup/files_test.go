package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests drive the control files of a hierarchy laid out in a
// temporary directory, as the kernel would show it: v2 on a machine that
// runs v1, and what a v1 machine mounts, without a kernel behind.

// writeFiles makes files under dir, name to content.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// mountinfo lines as this kind of machine shows them.
const (
	v1Mounts = `25 30 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / UNIFIED rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
28 25 0:25 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
29 25 0:26 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,memory
30 25 0:27 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,pids
31 25 0:28 / /sys/fs/cgroup/devices rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,devices
32 25 0:29 / /sys/fs/cgroup/freezer rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,freezer
33 25 0:30 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,xattr,name=systemd
`
	noCgroups = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
`
)

func TestDetect_V1WhereV2HasNoControllers(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"mountinfo":                  strings.Replace(v1Mounts, "UNIFIED", filepath.Join(dir, "unified"), 1),
		"unified/cgroup.controllers": "hugetlb\n",
	})
	h, err := Detect(filepath.Join(dir, "mountinfo"), "skein")
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != V1 {
		t.Fatalf("got %s, want v1: the unified hierarchy offers no cpu, memory, pids", h.Version)
	}
	want := map[string]string{
		"cpu": "/sys/fs/cgroup/cpu,cpuacct/skein", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct/skein",
		"memory": "/sys/fs/cgroup/memory/skein", "pids": "/sys/fs/cgroup/pids/skein",
		"devices": "/sys/fs/cgroup/devices/skein", "freezer": "/sys/fs/cgroup/freezer/skein",
	}
	if len(h.Dirs) != len(want) {
		t.Errorf("dirs %v, want %v", h.Dirs, want)
	}
	for c, d := range want {
		if h.Dirs[c] != d {
			t.Errorf("controller %s at %q, want %q", c, h.Dirs[c], d)
		}
	}
}

func TestDetect_V2WithControllers(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "cg")
	writeFiles(t, dir, map[string]string{
		"mountinfo":             "40 1 0:35 / " + mnt + " rw,nosuid - cgroup2 cgroup2 rw\n",
		"cg/cgroup.controllers": "cpuset cpu io memory hugetlb pids rdma misc\n",
	})
	h, err := Detect(filepath.Join(dir, "mountinfo"), "/skein/jobs/")
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != V2 || h.Dir != filepath.Join(mnt, "skein/jobs") || h.Mount != mnt {
		t.Fatalf("got %+v, want v2 at %s/skein/jobs", h, mnt)
	}
}

func TestDetect_NoneSaysWhatLacks(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "cg")
	writeFiles(t, dir, map[string]string{
		"mountinfo":             noCgroups + "40 1 0:35 / " + mnt + " rw - cgroup2 cgroup2 rw\n",
		"cg/cgroup.controllers": "io hugetlb\n",
	})
	_, err := Detect(filepath.Join(dir, "mountinfo"), "skein")
	if !errors.Is(err, ErrNoCgroups) {
		t.Fatalf("got %v, want ErrNoCgroups", err)
	}
	for _, want := range []string{"lacks cpu, memory, pids", "cgroup v1 lacks memory, cpu, pids, devices"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := Detect(filepath.Join(dir, "mountinfo"), "../escape"); !errors.Is(err, ErrBadName) {
		t.Errorf("parent ../escape: got %v, want ErrBadName", err)
	}
}

func TestParseMountinfo_UnescapesPaths(t *testing.T) {
	ms, err := parseMountinfo(strings.NewReader(`50 1 0:40 / /mnt/my\040cgroups rw - cgroup cgroup rw,pids,memory` + "\n"))
	if err != nil || len(ms) != 1 {
		t.Fatalf("got %v, %v", ms, err)
	}
	if ms[0].dir != "/mnt/my cgroups" || strings.Join(ms[0].controllers, ",") != "pids,memory" {
		t.Errorf("got %+v", ms[0])
	}
}

// v2Tree lays out a unified hierarchy: the root offering controllers, and
// the groups named in groups with the files a kernel gives a group.
func v2Tree(t *testing.T, groups ...string) string {
	t.Helper()
	mnt := t.TempDir()
	files := map[string]string{
		"cgroup.controllers":     "cpuset cpu io memory pids\n",
		"cgroup.subtree_control": "\n",
	}
	for _, g := range groups {
		for _, f := range []string{"cgroup.controllers", "cgroup.subtree_control", "cgroup.procs", "cgroup.kill",
			"cgroup.freeze", "cpu.max", "cpuset.cpus", "memory.max", "memory.swap.max", "pids.max"} {
			files[filepath.Join(g, f)] = ""
		}
		files[filepath.Join(g, "cgroup.controllers")] = "cpuset cpu io memory pids\n"
	}
	writeFiles(t, mnt, files)
	return mnt
}

// TestV2_PrepareHandsControllersDown: every group from the root to the
// parent enables cpu, memory and pids for its children, and cpuset where
// offered.
func TestV2_PrepareHandsControllersDown(t *testing.T) {
	mnt := v2Tree(t, "skein", "skein/jobs")
	h := &Hierarchy{Version: V2, Mount: mnt, Dir: filepath.Join(mnt, "skein/jobs")}
	if err := h.prepare(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "skein", "skein/jobs"} {
		// The fake keeps only the last write: the optional cpuset, after
		// the three a group needs in one.
		if got := readFile(t, filepath.Join(mnt, d, "cgroup.subtree_control")); got != "+cpuset" {
			t.Errorf("%s/cgroup.subtree_control: %q, want the last write +cpuset", d, got)
		}
	}
	// Without cpuset offered, the one write of the three stays.
	writeFiles(t, mnt, map[string]string{"cgroup.controllers": "cpu memory pids\n", "cgroup.subtree_control": ""})
	h.Dir = mnt
	if err := h.prepare(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(mnt, "cgroup.subtree_control")); got != "+cpu +memory +pids" {
		t.Errorf("root cgroup.subtree_control: %q, want +cpu +memory +pids", got)
	}
	// A hierarchy without a needed controller is refused, naming it.
	writeFiles(t, mnt, map[string]string{"cgroup.controllers": "cpu io\n"})
	if err := h.prepare(); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("prepare without memory: %v, want an error naming memory", err)
	}
}

// TestV2_CreateWritesLimits: a group's limits reach their files in the
// kernel's formats, and a group left from before is killed first.
func TestV2_CreateWritesLimits(t *testing.T) {
	mnt := v2Tree(t, "skein/alloc1")
	h := &Hierarchy{Version: V2, Mount: mnt, Dir: filepath.Join(mnt, "skein")}
	g, err := h.Create("alloc1", Limits{CPUs: 2, Cpuset: "0-1", MemoryBytes: 64 << 20, PidsMax: 64})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "skein/alloc1")
	for f, want := range map[string]string{
		"cpu.max":         "200000 100000",
		"cpuset.cpus":     "0-1",
		"memory.max":      "67108864",
		"memory.swap.max": "0",
		"pids.max":        "64",
		"cgroup.kill":     "1", // it existed: what it held was killed
	} {
		if got := readFile(t, filepath.Join(dir, f)); got != want {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
	if g.Name() != "alloc1" || g.Version() != V2 {
		t.Errorf("group %s, %s", g.Name(), g.Version())
	}
	// No quota, no limit: the files are left as the kernel made them.
	writeFiles(t, dir, map[string]string{"cpu.max": "max 100000", "memory.max": "max"})
	if _, err := h.Create("alloc1", Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(dir, "cpu.max")); got != "max 100000" {
		t.Errorf("cpu.max without a CPU limit: %q, want it untouched", got)
	}
}

func TestV2_StatsReadsTheKernelsFormats(t *testing.T) {
	mnt := v2Tree(t, "skein/a")
	writeFiles(t, filepath.Join(mnt, "skein/a"), map[string]string{
		"memory.peak":   "68157440\n",
		"memory.events": "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
		"cpu.stat":      "usage_usec 1500000\nuser_usec 1400000\nsystem_usec 100000\nnr_periods 20\nnr_throttled 7\nthrottled_usec 350000\n",
	})
	g, err := (&Hierarchy{Version: V2, Mount: mnt, Dir: filepath.Join(mnt, "skein")}).Group("a")
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{MemoryPeakBytes: 68157440, CPU: 1500 * time.Millisecond, Throttled: 350 * time.Millisecond,
		ThrottledPeriods: 7, OOMKills: 1}
	if st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	// Before Linux 5.19 there is no memory.peak: no peak, no error.
	if err := os.Remove(filepath.Join(mnt, "skein/a/memory.peak")); err != nil {
		t.Fatal(err)
	}
	if st, err := g.Stats(); err != nil || st.MemoryPeakBytes != 0 || st.OOMKills != 1 {
		t.Errorf("without memory.peak: %+v, %v", st, err)
	}
}

func TestLimits_CheckNamesTheLimit(t *testing.T) {
	for _, tc := range []struct {
		l    Limits
		want string
	}{
		{Limits{CPUs: -1}, "cpus -1"},
		{Limits{MemoryBytes: -5}, "memory -5"},
		{Limits{PidsMax: 3}, "pids_max 3 is below the minimum 8"},
		{Limits{Cpuset: "0 1"}, "cpuset"},
	} {
		err := tc.l.Check()
		if !errors.Is(err, ErrBadLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrBadLimit naming %q", tc.l, err, tc.want)
		}
	}
	if err := (Limits{CPUs: 4, MemoryBytes: 1 << 30, PidsMax: 8}).Check(); err != nil {
		t.Errorf("valid limits refused: %v", err)
	}
}
