// Package cgroup holds a job to what its allocation was given: one
// control group per allocation, made before the job's first instruction
// and removed after its last process, limiting its CPU time, memory (swap
// included), number of processes and the GPU device nodes it may open,
// and counting what it used.
//
// # Versions
//
// A node runs cgroup v2 (one unified hierarchy; most current
// distributions) or v1 (a hierarchy per controller), or both, v1 holding
// the controllers and v2 mounted empty beside it. Detect reads
// /proc/self/mountinfo and takes v2 when its hierarchy offers the cpu,
// memory and pids controllers, else v1 when the memory, cpu, pids and
// devices hierarchies are mounted, else nothing: a node where neither
// works runs its jobs unconfined only if its operator says so (the
// agent's --allow-unconfined). Prepare then makes the node's parent group
// (Hierarchy), under which every allocation's group goes, and proves that
// it can make a group there, so that a node that cannot confine says so
// at start rather than at a job's.
//
// The two versions hold a job to the same limits:
//
//	            v2                                   v1
//	CPU         cpu.max (quota/period)               cpu.cfs_quota_us, cfs_period_us
//	CPU set     cpuset.cpus                          cpuset.cpus (and mems, copied)
//	memory      memory.max, memory.swap.max 0        memory.limit_in_bytes, memsw (= limit)
//	processes   pids.max                             pids.max
//	devices     an eBPF program (BPF_CGROUP_DEVICE)  devices.deny
//	kill all    cgroup.kill (or freeze and kill)     freezer, then SIGKILL to each
//	peak memory memory.peak                          memory.max_usage_in_bytes
//	CPU used    cpu.stat usage_usec                  cpuacct.usage
//	throttled   cpu.stat nr_throttled, throttled_usec cpu.stat nr_throttled, throttled_time
//	OOM kills   memory.events oom_kill               memory.oom_control oom_kill
//
// Devices: a job may open every device its account may, except the GPUs
// of its node that are not its own: the group denies those device nodes
// (NVIDIA's major 195, the GPU's minor), as Slurm's ConstrainDevices
// denies the GPUs a job was not given and leaves the rest (InfiniBand,
// /dev/null, nvidiactl, nvidia-uvm) alone. In v2 the deny list is a small
// eBPF program (bpf.go) attached to the group; every program attached to
// a group or above it must allow an access.
//
// # Starting inside the group
//
// A job is in its group before it runs anything: in v2 the process is
// cloned straight into the group (CLONE_INTO_CGROUP). In v1, which has
// no such clone, the supervisor moves one of its own threads into the
// group (v1 groups take single threads; the thread writes "0", itself,
// which spares the kernel a system-wide lock) and forks the job from that
// thread, which the child's group comes from; the thread then exits
// rather than go back, so the supervisor's other threads are never in a
// job's group and the job is never outside it, not even for the
// instructions between a fork and a move.
//
// # Ending with the group
//
// Kill kills every process in the group, also those that left the
// job's process group or session (setsid daemons), and waits until the
// group is empty: v2 writes cgroup.kill; v1 freezes the group so that
// nothing in it can fork while it is listed, kills every process listed
// and thaws it, until nothing is left. Remove then removes the group's
// directories.
//
// Nothing here keeps state in memory that a restart would lose: a group
// is named by its hierarchy and the allocation's ID, both recorded in the
// allocation's spec, so a supervisor started anew, or the runner killing
// what a dead supervisor left, finds it again by name.
package cgroup
