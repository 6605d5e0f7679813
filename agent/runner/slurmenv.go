package runner

import (
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/skein-dev/skein/structs"
)

// DefaultPartition is the partition of a node that declares none, and of
// a job that names none.
const DefaultPartition = structs.DefaultPartition

// setSlurmEnv sets the variables a stock Slurm batch job sees, where they
// mean something here: the job's number as SLURM_JOB_ID, its nodes as a
// compressed, sorted host list, its GPUs, CPUs and memory on this node,
// its partition and, in an array, where the task sits. Every node runs
// one task of the job (sbatch's wrapper sets the task counts of
// --ntasks-per-node itself).
func setSlurmEnv(env *envList, t Task) {
	spec := t.Job.Spec
	names := make([]string, len(t.Peers))
	for i, p := range t.Peers {
		names[i] = p.Node
	}
	if len(names) == 0 {
		names = []string{t.NodeName}
	}
	n := len(names)
	nodes, rank := strconv.Itoa(n), strconv.Itoa(t.Alloc.Rank)
	id := SlurmJobID(&t.Job)
	env.set("SLURM_JOB_ID", id)
	env.set("SLURM_JOBID", id)
	env.set("SLURM_JOB_NAME", spec.Name)
	env.set("SLURM_NNODES", nodes)
	env.set("SLURM_JOB_NUM_NODES", nodes)
	env.set("SLURM_NODEID", rank)
	env.set("SLURM_PROCID", rank)
	env.set("SLURM_LOCALID", "0")
	env.set("SLURM_NTASKS", nodes)
	env.set("SLURM_NPROCS", nodes)
	env.set("SLURM_NTASKS_PER_NODE", "1")
	env.set("SLURM_TASKS_PER_NODE", PerNode(1, n))
	list := structs.HostList(names)
	env.set("SLURM_JOB_NODELIST", list)
	env.set("SLURM_NODELIST", list)
	env.set("SLURMD_NODENAME", t.NodeName)
	env.set("SLURM_TOPOLOGY_ADDR", t.NodeName)
	env.set("SLURM_TOPOLOGY_ADDR_PATTERN", "node")
	part := spec.Partition
	if part == "" {
		part = DefaultPartition
	}
	env.set("SLURM_JOB_PARTITION", part)
	env.set("SLURM_GPUS_ON_NODE", strconv.Itoa(spec.GPUs))
	if spec.GPUs > 0 {
		env.set("SLURM_GPUS_PER_NODE", strconv.Itoa(spec.GPUs))
		env.set("SLURM_GPUS", strconv.Itoa(spec.GPUs*n))
		idx := make([]string, len(t.GPUIndexes))
		for i, g := range t.GPUIndexes {
			idx[i] = strconv.Itoa(g)
		}
		env.set("SLURM_JOB_GPUS", strings.Join(idx, ","))
	}
	cpus := spec.CPUs
	if cpus == 0 {
		cpus = max(t.NodeCPUs, 1) // no CPU limit: the node's
	}
	env.set("SLURM_CPUS_ON_NODE", strconv.Itoa(cpus))
	env.set("SLURM_JOB_CPUS_PER_NODE", PerNode(cpus, n))
	if spec.MemoryMiB > 0 {
		env.set("SLURM_MEM_PER_NODE", strconv.FormatInt(int64(spec.MemoryMiB), 10))
	}
	if t.Job.Owner != "" {
		env.set("SLURM_JOB_USER", t.Job.Owner)
	}
	if t.Alloc.Attempt > 1 {
		env.set("SLURM_RESTART_COUNT", strconv.Itoa(t.Alloc.Attempt-1))
	}
	if t.Job.ArrayID != "" {
		env.set("SLURM_ARRAY_JOB_ID", arrayJobID(&t.Job))
		env.set("SLURM_ARRAY_TASK_ID", strconv.Itoa(t.Job.ArrayIndex))
		if a := spec.Array; a != nil {
			env.set("SLURM_ARRAY_TASK_MIN", strconv.Itoa(a.Start))
			env.set("SLURM_ARRAY_TASK_MAX", strconv.Itoa(a.End))
			env.set("SLURM_ARRAY_TASK_COUNT", strconv.Itoa(a.Len()))
			env.set("SLURM_ARRAY_TASK_STEP", "1")
		}
	}
}

// PerNode writes a count that is the same on each of n nodes as Slurm's
// SLURM_TASKS_PER_NODE does: "4" on one node, "4(x3)" on three.
func PerNode(count, n int) string {
	if n <= 1 {
		return strconv.Itoa(count)
	}
	return strconv.Itoa(count) + "(x" + strconv.Itoa(n) + ")"
}

// SlurmJobID is the job's SLURM_JOB_ID: its number (Job.Number); a job
// made before numbers were given has a number derived from its ID, for
// frameworks that parse SLURM_JOB_ID as one (to derive ports, say).
func SlurmJobID(j *structs.Job) string {
	if j.Number != 0 {
		return strconv.FormatUint(j.Number, 10)
	}
	return hashedNumber(j.ID)
}

// arrayJobID is an array task's SLURM_ARRAY_JOB_ID: its array's number.
func arrayJobID(j *structs.Job) string {
	if j.ArrayNumber != 0 {
		return strconv.FormatUint(j.ArrayNumber, 10)
	}
	return hashedNumber(j.ArrayID)
}

func hashedNumber(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return strconv.FormatUint(uint64(h.Sum32()%1_000_000_000), 10)
}
