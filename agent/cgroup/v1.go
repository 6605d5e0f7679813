package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// prepare makes the parent group in every v1 hierarchy the groups use,
// or the unified one in v2.
func (h *Hierarchy) prepare() error {
	if h.Version == V2 {
		return prepareV2(h.Mount, h.Dir)
	}
	for _, c := range h.controllers() {
		dir := h.Dirs[c]
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("make %s: %w", dir, err)
		}
		if c == "cpuset" {
			// A new cpuset group has no CPUs and no memory nodes: no
			// process may join it until it is given its parent's.
			if err := inheritCpuset(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// inheritCpuset gives dir, and each group above it that has none, the
// CPUs and memory nodes of its parent.
func inheritCpuset(dir string) error {
	for _, name := range []string{"cpuset.cpus", "cpuset.mems"} {
		if err := inheritFile(dir, name); err != nil {
			return err
		}
	}
	return nil
}

func inheritFile(dir, name string) error {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(dir, name), err)
	}
	if strings.TrimSpace(string(data)) != "" {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := inheritFile(parent, name); err != nil {
		return err
	}
	data, err = os.ReadFile(filepath.Join(parent, name))
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(parent, name), err)
	}
	return writeFile(dir, name, strings.TrimSpace(string(data)))
}

// createV1 makes the group's directory in each hierarchy and writes its
// limits. The cpuset hierarchy is used only when the group is pinned.
func (g *Group) createV1(l Limits) error {
	if l.Cpuset == "" {
		delete(g.dirs, "cpuset")
	}
	var existed bool
	for _, c := range sortedControllers(g.dirs) {
		err := os.Mkdir(g.dirs[c], 0o755)
		if errors.Is(err, fs.ErrExist) {
			existed = true
		} else if err != nil {
			return fmt.Errorf("make %s: %w", g.dirs[c], err)
		}
	}
	if existed {
		// Left by a supervisor that died: what it held goes first.
		if err := g.Kill(); err != nil {
			return err
		}
	}
	if d, ok := g.dirs["cpuset"]; ok {
		if err := inheritFile(d, "cpuset.mems"); err != nil {
			return err
		}
		if err := writeFile(d, "cpuset.cpus", l.Cpuset); err != nil {
			return err
		}
	}
	if l.MemoryBytes > 0 {
		if err := limitMemoryV1(g.dirs["memory"], l.MemoryBytes); err != nil {
			return err
		}
	}
	if l.CPUs > 0 {
		d := g.dirs["cpu"]
		period := CFSPeriod.Microseconds()
		if err := writeFile(d, "cpu.cfs_period_us", strconv.FormatInt(period, 10)); err != nil {
			return err
		}
		if err := writeFile(d, "cpu.cfs_quota_us", strconv.FormatInt(int64(l.CPUs)*period, 10)); err != nil {
			return err
		}
	}
	if l.PidsMax > 0 {
		if err := writeFile(g.dirs["pids"], "pids.max", strconv.FormatInt(l.PidsMax, 10)); err != nil {
			return err
		}
	}
	for _, dev := range l.DenyDevices {
		if err := writeFile(g.dirs["devices"], "devices.deny", dev.String()+" rwm"); err != nil {
			return err
		}
	}
	return nil
}

// limitMemoryV1 sets a v1 group's memory limit, swap included where the
// kernel counts swap. The limit with swap may never be below the one
// without: lowering goes memory first, raising swap first.
func limitMemoryV1(dir string, bytes int64) error {
	v := strconv.FormatInt(bytes, 10)
	err := writeFile(dir, "memory.limit_in_bytes", v)
	if err != nil {
		// Above the present limit with swap: raise that first.
		if serr := writeFile(dir, "memory.memsw.limit_in_bytes", v); serr != nil {
			return err
		}
		return writeFile(dir, "memory.limit_in_bytes", v)
	}
	if err := writeFile(dir, "memory.memsw.limit_in_bytes", v); err != nil && !errors.Is(err, ErrNoGroupFile) {
		return err
	}
	return nil
}

// sortedControllers are a group's v1 controllers, in a fixed order.
func sortedControllers(dirs map[string]string) []string {
	var cs []string
	for _, c := range append(append([]string{}, v1Required...), v1Optional...) {
		if _, ok := dirs[c]; ok {
			cs = append(cs, c)
		}
	}
	return cs
}

// freeze sets the v1 freezer's state (FROZEN or THAWED) and waits, a
// moment at most, until the kernel says it holds.
func freeze(dir, state string) error {
	if err := writeFile(dir, "freezer.state", state); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Second)
	for {
		data, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil {
			return err
		}
		if strings.TrimSpace(string(data)) == state || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// statsV1 reads what the group used from its v1 hierarchies.
func (g *Group) statsV1() (Stats, error) {
	var st Stats
	mem := g.dirs["memory"]
	peak, err := readInt(filepath.Join(mem, "memory.memsw.max_usage_in_bytes"))
	if errors.Is(err, fs.ErrNotExist) {
		peak, err = readInt(filepath.Join(mem, "memory.max_usage_in_bytes"))
	}
	if err != nil {
		return st, fmt.Errorf("read peak memory: %w", err)
	}
	st.MemoryPeakBytes = peak
	oom, err := readKeyed(filepath.Join(mem, "memory.oom_control"))
	if err != nil {
		return st, fmt.Errorf("read memory.oom_control: %w", err)
	}
	st.OOMKills = oom["oom_kill"]
	usageDir := g.dirs["cpuacct"]
	if usageDir == "" {
		usageDir = g.dirs["cpu"]
	}
	if ns, err := readInt(filepath.Join(usageDir, "cpuacct.usage")); err == nil {
		st.CPU = time.Duration(ns)
	}
	cpu, err := readKeyed(filepath.Join(g.dirs["cpu"], "cpu.stat"))
	if err != nil {
		return st, fmt.Errorf("read cpu.stat: %w", err)
	}
	st.ThrottledPeriods = cpu["nr_throttled"]
	st.Throttled = time.Duration(cpu["throttled_time"])
	return st, nil
}
