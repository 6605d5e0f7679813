package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The controllers a v2 group is given, and those it is given when the
// hierarchy offers them.
var (
	v2Wanted   = []string{"cpu", "memory", "pids"}
	v2Optional = []string{"cpuset"}
)

// prepareV2 makes the parent group dir below the unified hierarchy's root
// mount, handing the controllers down from the root to it: each group on
// the way enables them for its children (cgroup.subtree_control), so that
// the allocations' groups under dir have them. A group on the way that
// holds processes cannot hand controllers down (v2 keeps processes in
// leaves only): the operator then names another parent.
func prepareV2(mount, dir string) error {
	rel, err := filepath.Rel(mount, dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("parent group %s is not under the cgroup mount %s", dir, mount)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	steps := []string{mount}
	if rel != "." {
		p := mount
		for part := range strings.SplitSeq(rel, string(filepath.Separator)) {
			p = filepath.Join(p, part)
			steps = append(steps, p)
		}
	}
	for _, d := range steps {
		have, err := readWords(filepath.Join(d, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(d, "cgroup.controllers"), err)
		}
		on, err := readWords(filepath.Join(d, "cgroup.subtree_control"))
		if err != nil {
			return fmt.Errorf("read %s: %w", filepath.Join(d, "cgroup.subtree_control"), err)
		}
		var enable []string
		for _, c := range v2Wanted {
			if !slices.Contains(have, c) {
				return fmt.Errorf("%s does not offer the %s controller", d, c)
			}
			if !slices.Contains(on, c) {
				enable = append(enable, "+"+c)
			}
		}
		if len(enable) > 0 {
			if err := writeFile(d, "cgroup.subtree_control", strings.Join(enable, " ")); err != nil {
				return fmt.Errorf("hand the controllers down from %s (a group holding processes cannot): %w", d, err)
			}
		}
		for _, c := range v2Optional {
			if slices.Contains(have, c) && !slices.Contains(on, c) {
				// Only a pinned job needs it: without, it is not pinned.
				_ = writeFile(d, "cgroup.subtree_control", "+"+c)
			}
		}
	}
	return nil
}

// createV2 makes the group's directory and writes its limits.
func (g *Group) createV2(l Limits) error {
	err := os.Mkdir(g.dir, 0o755)
	switch {
	case errors.Is(err, fs.ErrExist):
		// Left by a supervisor that died: what it held goes first.
		if err := g.Kill(); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("make %s: %w", g.dir, err)
	}
	if l.CPUs > 0 {
		period := CFSPeriod.Microseconds()
		if err := writeFile(g.dir, "cpu.max", fmt.Sprintf("%d %d", int64(l.CPUs)*period, period)); err != nil {
			return err
		}
	}
	if l.Cpuset != "" {
		if err := writeFile(g.dir, "cpuset.cpus", l.Cpuset); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 {
		if err := writeFile(g.dir, "memory.max", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
		// Without swap accounting there is no swap to limit.
		if err := writeFile(g.dir, "memory.swap.max", "0"); err != nil && !errors.Is(err, ErrNoGroupFile) {
			return err
		}
	}
	if l.PidsMax > 0 {
		if err := writeFile(g.dir, "pids.max", strconv.FormatInt(l.PidsMax, 10)); err != nil {
			return err
		}
	}
	if len(l.DenyDevices) > 0 {
		if err := attachDeviceFilter(g.dir, l.DenyDevices); err != nil {
			return fmt.Errorf("device filter: %w", err)
		}
	}
	return nil
}

// statsV2 reads what the group used.
func (g *Group) statsV2() (Stats, error) {
	var st Stats
	peak, err := readInt(filepath.Join(g.dir, "memory.peak"))
	switch {
	case err == nil:
		st.MemoryPeakBytes = peak
	case !errors.Is(err, fs.ErrNotExist):
		return st, fmt.Errorf("read memory.peak: %w", err)
	}
	events, err := readKeyed(filepath.Join(g.dir, "memory.events"))
	if err != nil {
		return st, fmt.Errorf("read memory.events: %w", err)
	}
	st.OOMKills = events["oom_kill"]
	cpu, err := readKeyed(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return st, fmt.Errorf("read cpu.stat: %w", err)
	}
	st.CPU = time.Duration(cpu["usage_usec"]) * time.Microsecond
	st.ThrottledPeriods = cpu["nr_throttled"]
	st.Throttled = time.Duration(cpu["throttled_usec"]) * time.Microsecond
	return st, nil
}
