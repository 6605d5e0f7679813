package testutil

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// RSSMiB reads a process's resident memory (VmRSS) from /proc, in MiB.
func RSSMiB(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// CPUSeconds reads the CPU time (user and system) a process has used so
// far from /proc, in seconds.
func CPUSeconds(pid int) (float64, error) {
	t, err := cpuTimes(pid)
	return t[0] + t[1], err
}

// ChildrenCPUSeconds reads the CPU time (user and system) of the children
// a process has waited for so far, theirs included, from /proc, in
// seconds.
func ChildrenCPUSeconds(pid int) (float64, error) {
	t, err := cpuTimes(pid)
	return t[2] + t[3], err
}

// cpuTimes reads utime, stime, cutime and cstime of a process from /proc,
// in seconds.
func cpuTimes(pid int) ([4]float64, error) {
	var t [4]float64
	f, err := statFields(pid)
	if err != nil {
		return t, err
	}
	// utime, stime, cutime and cstime are fields 14 to 17 of the line,
	// in clock ticks of 1/100 s on Linux.
	if len(f) < 15 {
		return t, fmt.Errorf("short /proc/%d/stat", pid)
	}
	for k := range t {
		ticks, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return t, fmt.Errorf("unreadable CPU times in /proc/%d/stat", pid)
		}
		t[k] = ticks / clockTicks
	}
	return t, nil
}

// Children lists the processes whose parent is pid.
func Children(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	parent := strconv.Itoa(pid)
	var kids []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// The parent is field 4 of the line; a process gone meanwhile
		// is no child.
		if f, err := statFields(child); err == nil && len(f) > 1 && f[1] == parent {
			kids = append(kids, child)
		}
	}
	return kids, nil
}

// statFields reads /proc/<pid>/stat and returns its fields after the
// command name (field 3 on), which is in parentheses and may hold spaces.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	return strings.Fields(string(b)[i+1:]), nil
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100
