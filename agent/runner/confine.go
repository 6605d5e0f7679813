package runner

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/structs"
	"golang.org/x/sys/unix"
)

// How jobs are held to what their allocations were given: the runner
// resolves each job's limits into its spec (limits, and the hierarchy its
// group goes in), and the supervisor makes the group before the job
// starts, runs the job in it, kills whatever is left in it when the job
// is over, records what the job used and removes it (supervise.go).

// DefaultPidsMax is a job's process limit on a node that sets none: far
// above what a training job's workers and their threads need, far below
// what takes a node down.
const DefaultPidsMax = 16384

// ErrUnconfined: the node cannot confine jobs and was not allowed to run
// them unconfined.
var ErrUnconfined = errors.New("this node cannot confine jobs")

// confinement is how the runner confines the jobs it starts.
type confinement struct {
	cgroups    *cgroup.Hierarchy
	unconfined string // why cgroups is nil
	allow      bool   // run jobs unconfined when cgroups is nil
	pidsMax    int64
	pinCPUs    bool
	cpus       []int // the CPUs jobs may be pinned to
	gpuMinors  map[string]uint32
}

func newConfinement(cfg Config) (confinement, error) {
	c := confinement{
		cgroups:    cfg.Cgroups,
		unconfined: cfg.Unconfined,
		allow:      cfg.AllowUnconfined,
		pidsMax:    cfg.PidsMax,
		pinCPUs:    cfg.PinCPUs,
		gpuMinors:  maps.Clone(cfg.GPUMinors),
	}
	if c.pidsMax == 0 {
		c.pidsMax = DefaultPidsMax
	}
	if c.pidsMax < structs.MinPidsMax || c.pidsMax > structs.MaxPidsMax {
		return c, fmt.Errorf("job pids max %d: out of range %d..%d", c.pidsMax, structs.MinPidsMax, structs.MaxPidsMax)
	}
	if c.pinCPUs {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &set); err != nil {
			return c, fmt.Errorf("pin jobs to CPUs: read this process's CPUs: %w", err)
		}
		for cpu := range 1024 {
			if set.IsSet(cpu) {
				c.cpus = append(c.cpus, cpu)
			}
		}
	}
	return c, nil
}

// Describe says how the runner confines jobs, for the node's record and
// the agent's log: "cgroup v1", "cgroup v2", or "none: why".
func (r *Runner) Describe() string {
	if r.confine.cgroups != nil {
		return r.confine.cgroups.Version.String()
	}
	return "none: " + r.confine.unconfined
}

// Refuses says why the runner starts no job at all, or "".
func (r *Runner) Refuses() string {
	if r.confine.cgroups != nil || r.confine.allow {
		return ""
	}
	return fmt.Sprintf("%s: %s; its agent runs jobs unconfined only with --allow-unconfined", ErrUnconfined, r.confine.unconfined)
}

// PidsMax is the most processes and threads a job may hold here.
func (r *Runner) PidsMax() int64 { return r.confine.pidsMax }

// limits resolves what a task's job may use on this node, and the
// hierarchy its group goes in (nil for a job that runs unconfined or in
// a container, which its engine confines). Pinned CPUs are chosen here,
// under the allocation's lock, and kept with the allocation.
func (r *Runner) limits(a *alloc, t Task) (*limits, *cgroup.Hierarchy, error) {
	if why := r.Refuses(); why != "" {
		return nil, nil, errors.New(why)
	}
	l := &limits{
		CPUs:        t.Alloc.CPUs,
		MemoryBytes: t.Alloc.MemoryMiB << 20,
		PidsMax:     r.confine.pidsMax,
	}
	if p := t.Job.Spec.PidsMax; p > 0 {
		if p > r.confine.pidsMax {
			return nil, nil, fmt.Errorf("pids_max %d is above this node's limit of %d", p, r.confine.pidsMax)
		}
		l.PidsMax = p
	}
	mine := make(map[string]bool, len(t.Alloc.GPUs))
	for _, u := range t.Alloc.GPUs {
		mine[u] = true
	}
	for _, u := range slices.Sorted(maps.Keys(r.confine.gpuMinors)) {
		if !mine[u] {
			l.DenyGPUMinors = append(l.DenyGPUMinors, r.confine.gpuMinors[u])
		}
	}
	slices.Sort(l.DenyGPUMinors)
	if r.confine.pinCPUs && l.CPUs > 0 {
		l.Cpuset = formatCPUList(r.pinCPUs(a, l.CPUs))
	}
	if t.Job.Spec.Image != "" {
		return l, nil, nil
	}
	return l, r.confine.cgroups, nil
}

// pinCPUs chooses n of the node's CPUs for an allocation and keeps them
// with it: those the fewest other tracked allocations are pinned to,
// lowest first, so that jobs share no CPU while the node has CPUs for
// each.
func (r *Runner) pinCPUs(a *alloc, n int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	load := make(map[int]int)
	for _, o := range r.allocs {
		if o != a {
			for _, c := range o.cpus {
				load[c]++
			}
		}
	}
	cpus := slices.Clone(r.confine.cpus)
	slices.SortStableFunc(cpus, func(x, y int) int { return load[x] - load[y] })
	cpus = cpus[:min(n, len(cpus))]
	slices.Sort(cpus)
	a.cpus = cpus
	return cpus
}

// adoptCPUs takes over the CPUs an adopted allocation's job is pinned
// to, from its spec, so that new jobs are pinned beside it.
func (r *Runner) adoptCPUs(a *alloc) {
	var sp spec
	if found, err := readJSON(filepath.Join(a.dir, specFile), &sp); !found || err != nil || sp.Limits == nil || sp.Limits.Cpuset == "" {
		return
	}
	cpus := parseCPUList(sp.Limits.Cpuset)
	r.mu.Lock()
	a.cpus = cpus
	r.mu.Unlock()
}

// formatCPUList writes sorted CPUs as the kernel's lists do: "0-3,8".
func formatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// parseCPUList reads a kernel CPU list ("0-3,8") back.
func parseCPUList(s string) []int {
	var cpus []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				continue
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// cgroupLimits are a spec's limits as its group takes them.
func (l *limits) cgroupLimits() cgroup.Limits {
	if l == nil {
		return cgroup.Limits{}
	}
	cl := cgroup.Limits{CPUs: l.CPUs, Cpuset: l.Cpuset, MemoryBytes: l.MemoryBytes, PidsMax: l.PidsMax}
	if l.Cpuset != "" {
		cl.CPUs = 0 // pinned instead
	}
	for _, m := range l.DenyGPUMinors {
		cl.DenyDevices = append(cl.DenyDevices, cgroup.Device{Major: cgroup.NVIDIAMajor, Minor: m})
	}
	return cl
}

// startBeside starts cmd, a command run beside a running job (skein
// exec, a terminal), inside the job's cgroup where it has one: the job's
// limits and GPU device filter hold it as they hold the job, and it ends
// with the job's group.
func startBeside(sp spec, cmd *exec.Cmd) error {
	if sp.Cgroup == nil {
		return cmd.Start()
	}
	g, err := sp.Cgroup.Open(sp.AllocID)
	if err != nil {
		return fmt.Errorf("the job's cgroup: %w", err)
	}
	return g.Start(cmd)
}

// specGroup is the group of an allocation whose spec names a hierarchy,
// or nil.
func specGroup(sp spec) (*cgroup.Group, error) {
	if sp.Cgroup == nil {
		return nil, nil
	}
	return sp.Cgroup.Group(sp.AllocID)
}

// usage turns what a group counted into what the allocation records.
func usage(st cgroup.Stats, l *limits) *structs.AllocUsage {
	u := &structs.AllocUsage{
		MemoryPeakBytes:  st.MemoryPeakBytes,
		CPUTime:          structs.Duration(st.CPU),
		CPUThrottled:     structs.Duration(st.Throttled),
		ThrottledPeriods: st.ThrottledPeriods,
		OOMKills:         st.OOMKills,
	}
	if l != nil {
		u.MemoryLimitBytes = l.MemoryBytes
	}
	return u
}
