package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tasksOf lists the thread IDs a v1 group's directory holds.
func tasksOf(t testing.TB, dir string) []int {
	t.Helper()
	data, err := os.ReadFile(dir + "/tasks")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, f := range strings.Fields(string(data)) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%s/tasks: %q", dir, f)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestReal_StartJoinsEveryHierarchyAndLeavesTheStarterOut: in v1, the
// process Start starts is in the group in every hierarchy, and the
// thread that joined to fork it ends: soon no thread of the starting
// process is in the group, only the job.
func TestReal_StartJoinsEveryHierarchyAndLeavesTheStarterOut(t *testing.T) {
	h := realHierarchy(t)
	if h.Version != V1 {
		t.Skip("v2 clones the process into its group (TestRealV2_DeviceFilterAndCloneInto)")
	}
	g, err := h.Create("start", Limits{MemoryBytes: 64 << 20, CPUs: 1, PidsMax: 16})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := g.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = g.Kill()
		_ = cmd.Wait()
		_ = g.Remove()
	})
	for _, c := range sortedControllers(g.dirs) {
		waitUntil(t, 10*time.Second, c+"'s group to hold the job alone", func() (bool, string) {
			tasks := tasksOf(t, g.dirs[c])
			return slices.Equal(tasks, []int{cmd.Process.Pid}), fmt.Sprintf("threads %v, the job %d", tasks, cmd.Process.Pid)
		})
	}
}

// BenchmarkReal_StartInGroup is what starting a process in a new group
// costs a supervisor: the group made with a job's limits, the process
// started in it (true), the group removed once it ended. Starts are
// spaced as a node's jobs are (SKEIN_BENCH_GAP, default 100ms, outside
// the timer): a v1 join that takes the kernel's system-wide lock waits
// for an RCU grace period, which joins in quick succession share.
func BenchmarkReal_StartInGroup(b *testing.B) {
	h := realHierarchy(b)
	gap := 100 * time.Millisecond
	if s := os.Getenv("SKEIN_BENCH_GAP"); s != "" {
		var err error
		if gap, err = time.ParseDuration(s); err != nil {
			b.Fatalf("SKEIN_BENCH_GAP=%q: %v", s, err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		time.Sleep(gap)
		b.StartTimer()
		g, err := h.Create(fmt.Sprintf("bench-%d", i), Limits{MemoryBytes: 64 << 20, CPUs: 1, PidsMax: 16})
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("true")
		if err := g.Start(cmd); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = cmd.Wait()
		if err := g.Remove(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
