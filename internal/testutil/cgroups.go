package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/skein-dev/skein/agent/cgroup"
)

// cgroupsParent is the parent group, below each hierarchy's root, of the
// groups test binaries make: one group each, named after the binary and
// its pid.
const cgroupsParent = "skein-test"

var testCgroups struct {
	once   sync.Once
	h      *cgroup.Hierarchy
	parent string // below each hierarchy's root
	why    string
	agents atomic.Int64
}

// Cgroups is a cgroup hierarchy of this test binary's own, for runners and
// agents to confine their jobs in as a node does, made on first use; nil
// and why where the machine offers none a test may use (not root, no
// controllers). RemoveCgroups removes it. Groups left by test binaries
// that died are removed on the way.
func Cgroups() (*cgroup.Hierarchy, string) {
	testCgroups.once.Do(func() {
		if os.Geteuid() != 0 {
			testCgroups.why = "making cgroups needs root"
			return
		}
		name := fmt.Sprintf("%s-%d", strings.TrimSuffix(filepath.Base(os.Args[0]), ".test"), os.Getpid())
		testCgroups.parent = filepath.Join(cgroupsParent, name)
		h, err := cgroup.Detect("/proc/self/mountinfo", testCgroups.parent)
		if err == nil {
			sweepDeadTestCgroups(h)
			err = h.Prepare()
		}
		if err != nil {
			testCgroups.why = err.Error()
			return
		}
		testCgroups.h = h
	})
	return testCgroups.h, testCgroups.why
}

// AgentCgroupParent is a parent group (an agent's --cgroup-parent) of
// its own for each agent a test starts, inside this binary's, so that
// RemoveCgroups removes what the agent leaves; "" where the machine
// offers no cgroups a test may use (the agent then runs its jobs
// unconfined, which tests allow).
func AgentCgroupParent() string {
	if h, _ := Cgroups(); h == nil {
		return ""
	}
	return filepath.Join(testCgroups.parent, fmt.Sprintf("agent%d", testCgroups.agents.Add(1)))
}

// RemoveCgroups removes this binary's hierarchy, killing what is left in
// it; a TestMain calls it once the tests are over.
func RemoveCgroups() {
	if testCgroups.h != nil {
		removeTestHierarchy(testCgroups.h)
	}
}

// parentDirs are the directories of a hierarchy's parent group.
func parentDirs(h *cgroup.Hierarchy) []string {
	if h.Version == cgroup.V2 {
		return []string{h.Dir}
	}
	var dirs []string
	for _, d := range h.Dirs {
		dirs = append(dirs, d)
	}
	return dirs
}

// removeTestHierarchy empties and removes a test binary's groups, at any
// depth (an agent's are two levels down: its node's group, then its
// allocations'), and its parent group.
func removeTestHierarchy(h *cgroup.Hierarchy) {
	for _, d := range parentDirs(h) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !e.IsDir() {
				continue
			}
			below := *h
			if below.Version == cgroup.V2 {
				below.Dir = filepath.Join(h.Dir, e.Name())
			} else {
				below.Dirs = make(map[string]string)
				for c, dir := range h.Dirs {
					below.Dirs[c] = filepath.Join(dir, e.Name())
				}
			}
			removeTestHierarchy(&below)
			if g, err := h.Group(e.Name()); err == nil {
				_ = g.Kill()
				_ = g.Remove()
			}
		}
		_ = os.Remove(d)
	}
}

// sweepDeadTestCgroups removes the groups of test binaries whose process
// is gone (killed at a timeout), found beside this binary's.
func sweepDeadTestCgroups(h *cgroup.Hierarchy) {
	for _, d := range parentDirs(h) {
		entries, _ := os.ReadDir(filepath.Dir(d))
		for _, e := range entries {
			i := strings.LastIndexByte(e.Name(), '-')
			pid, err := strconv.Atoi(e.Name()[i+1:])
			if !e.IsDir() || i < 0 || err != nil || processAlive(pid) {
				continue
			}
			dead := *h
			rel := filepath.Join(cgroupsParent, e.Name())
			if dead.Version == cgroup.V2 {
				dead.Dir = filepath.Join(dead.Mount, rel)
			} else {
				dead.Dirs = make(map[string]string)
				for c, dir := range h.Dirs {
					dead.Dirs[c] = filepath.Join(filepath.Dir(dir), e.Name())
				}
			}
			removeTestHierarchy(&dead)
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
