package runner

import (
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestBuildEnv_SlurmVariablesAsAStockSlurmJob(t *testing.T) {
	peers := []Peer{{Rank: 0, Node: "node2", Addr: "10.0.0.6"}, {Rank: 1, Node: "node1", Addr: "10.0.0.5"}, {Rank: 2, Node: "node3"}}
	job := structs.Job{ID: "abc-4", Number: 17, ArrayID: "abc", ArrayNumber: 15, ArrayIndex: 4, Owner: "alice",
		Spec: structs.JobSpec{Name: "train", Nodes: 3, GPUs: 2, CPUs: 8, MemoryMiB: 4096, Partition: "gpu",
			Array: &structs.ArraySpec{Start: 2, End: 6}}}
	task := Task{
		Alloc: structs.Allocation{ID: "a1", JobID: job.ID, Rank: 1, Attempt: 3, GPUs: []string{"GPU-x", "GPU-y"}},
		Job:   job, NodeName: "node1", Peers: peers, MasterPort: 29777, GPUIndexes: []int{2, 5}, NodeCPUs: 64,
	}
	env := envMap(t, BuildEnv(task, []string{"SLURM_JOB_ID=9", "SLURM_NODELIST=stale"}))
	want := map[string]string{
		"SLURM_JOB_ID": "17", "SLURM_JOBID": "17", "SLURM_JOB_NAME": "train",
		"SLURM_JOB_NODELIST": "node[1-3]", "SLURM_NODELIST": "node[1-3]", "SLURM_NNODES": "3",
		"SLURM_JOB_NUM_NODES": "3", "SLURM_NODEID": "1", "SLURM_PROCID": "1", "SLURM_NTASKS": "3",
		"SLURM_TASKS_PER_NODE": "1(x3)", "SLURMD_NODENAME": "node1", "SKEIN_HEAD_NODE": "node2", "SLURM_JOB_PARTITION": "gpu",
		"SLURM_GPUS_ON_NODE": "2", "SLURM_GPUS_PER_NODE": "2", "SLURM_GPUS": "6", "SLURM_JOB_GPUS": "2,5",
		"SLURM_CPUS_ON_NODE": "8", "SLURM_JOB_CPUS_PER_NODE": "8(x3)", "SLURM_MEM_PER_NODE": "4096",
		"SLURM_JOB_USER": "alice", "SLURM_RESTART_COUNT": "2",
		"SLURM_ARRAY_JOB_ID": "15", "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "2",
		"SLURM_ARRAY_TASK_MAX": "6", "SLURM_ARRAY_TASK_COUNT": "5",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestBuildEnv_SlurmVariablesOfAPlainJobWithoutPeers(t *testing.T) {
	task := Task{
		Alloc: structs.Allocation{ID: "a1", JobID: "j1", Attempt: 1},
		Job:   structs.Job{ID: "j1", Number: 5, Spec: structs.JobSpec{Nodes: 1}}, NodeName: "vm", NodeCPUs: 4,
	}
	env := envMap(t, BuildEnv(task, nil))
	want := map[string]string{
		"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "vm", "SLURM_NNODES": "1", "SLURM_TASKS_PER_NODE": "1",
		"SLURM_JOB_PARTITION": structs.DefaultPartition, "SLURM_CPUS_ON_NODE": "4", "SLURM_JOB_CPUS_PER_NODE": "4",
		"SLURM_GPUS_ON_NODE": "0",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	for _, k := range []string{"SLURM_JOB_GPUS", "SLURM_GPUS", "SLURM_MEM_PER_NODE", "SLURM_RESTART_COUNT", "SLURM_ARRAY_JOB_ID", "MASTER_ADDR"} {
		if v, ok := env[k]; ok {
			t.Errorf("%s = %q, want it unset", k, v)
		}
	}
}

func TestSlurmJobID_OldJobsWithoutANumberStillGetOne(t *testing.T) {
	j := structs.Job{ID: "6f1c2a9e04b84d3f9e1a7c5b2d8f0e31"}
	a, b := SlurmJobID(&j), SlurmJobID(&j)
	if a != b || a == "" || a == "0" {
		t.Fatalf("SlurmJobID of a job without a number: %q then %q, want one stable number", a, b)
	}
}
