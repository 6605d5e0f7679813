package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/agent/runner"
)

// DefaultCgroupParent is the group, below each cgroup hierarchy's root,
// under which a node makes its own group, named after it, and its jobs'
// groups in that (--cgroup-parent): /sys/fs/cgroup/skein/NODE/ALLOC in v2.
const DefaultCgroupParent = "skein"

// DefaultJobPidsMax is a job's process limit where the operator sets none
// and the kernel's pid space is large (--job-pids-max).
const DefaultJobPidsMax = runner.DefaultPidsMax

// defaultJobPidsMax is DefaultJobPidsMax, or a quarter of the kernel's pid
// space where that is less: one job's fork bomb leaves the node most of
// its pids.
func defaultJobPidsMax() int64 {
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return DefaultJobPidsMax
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || n <= 0 {
		return DefaultJobPidsMax
	}
	return max(min(DefaultJobPidsMax, n/4), 8)
}

// confinement finds how this node confines its jobs: the cgroup hierarchy
// its allocations' groups go in, with the node's own group made and the
// memory it offers jobs as that group's limit (jobs without --mem of their
// own are held to it, all together), or nil and why the node cannot.
func (a *Agent) confinement() (*cgroup.Hierarchy, string) {
	if os.Geteuid() != 0 {
		return nil, "the agent is not root, and only root makes cgroups"
	}
	h, err := cgroup.Detect("/proc/self/mountinfo", filepath.Join(a.cfg.CgroupParent, a.cfg.Name))
	if err == nil {
		err = h.Prepare()
	}
	if err == nil && a.cfg.MemoryMiB > 0 {
		err = h.LimitParent(a.cfg.MemoryMiB << 20)
	}
	if err != nil {
		return nil, err.Error()
	}
	return h, ""
}

// logConfinement says at start how jobs are confined, or why they are not.
func (a *Agent) logConfinement(h *cgroup.Hierarchy, why string) {
	switch {
	case h != nil:
		a.logger.Info("jobs are confined: a cgroup per allocation for CPU, memory, processes and GPU devices",
			"cgroups", h.Describe(), "job_pids_max", a.cfg.JobPidsMax, "pin_cpus", a.cfg.PinCPUs)
	case a.cfg.AllowUnconfined:
		a.logger.Warn("JOBS RUN UNCONFINED (--allow-unconfined): nothing holds them to their --mem, --cpus or GPUs", "why", why)
	default:
		a.logger.Error("this node cannot confine jobs and takes none; start it with --allow-unconfined to run them unconfined", "why", why)
	}
}
