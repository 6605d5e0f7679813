package sched

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/skein-dev/skein/structs"
)

func TestPlace_BlockedReasonNamesEveryFilter(t *testing.T) {
	cases := []struct {
		name   string
		nodes  []*structs.Node
		allocs []*structs.Allocation
		job    *structs.Job
		want   string
	}{
		{
			name: "no nodes registered",
			job:  job("j", 1),
			want: "no nodes registered",
		},
		{
			name:  "node down",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80, withStatus(structs.NodeDown))},
			job:   job("j", 1),
			want:  "1 node: node down",
		},
		{
			name: "statuses counted apart, plural, most frequent first",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80, withStatus(structs.NodeDraining)),
				gpuNode("n2", 8, "A100", 80, withStatus(structs.NodeDown)),
				gpuNode("n3", 8, "A100", 80, withStatus(structs.NodeDown)),
			},
			job:  job("j", 1),
			want: "2 nodes: node down; 1 node: node draining",
		},
		{
			name:  "node without status",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80, withStatus(""))},
			job:   job("j", 1),
			want:  "1 node: node status unknown",
		},
		{
			name:  "constraint with another value",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80, withLabels("zone", "a"))},
			job:   job("j", 1, constraint("zone", "b")),
			want:  "1 node: missing constraint zone=b",
		},
		{
			name:  "constraint label absent, first missing key named",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80, withLabels("rack", "r1"))},
			job:   job("j", 1, constraint("zone", "a"), constraint("rack", "r2")),
			want:  "1 node: missing constraint rack=r2",
		},
		{
			name:  "gpu model",
			nodes: []*structs.Node{gpuNode("n1", 8, "H100", 80)},
			job:   job("j", 1, model("A100")),
			want:  "1 node: gpu_model A100 required",
		},
		{
			name:  "gpu memory",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 40)},
			job:   job("j", 1, gpuMemGiB(80)),
			want:  "1 node: gpu memory < 80G",
		},
		{
			name: "gpu memory counts only GPUs of the model",
			nodes: []*structs.Node{{
				ID: "n1", Status: structs.NodeReady, GPUs: []structs.GPU{
					{Index: 0, UUID: "u0", Model: "A100", MemoryMiB: 40 << 10, Healthy: true},
					{Index: 1, UUID: "u1", Model: "H100", MemoryMiB: 80 << 10, Healthy: true},
				},
			}},
			job:  job("j", 1, model("A100"), gpuMemGiB(80)),
			want: "1 node: gpu memory < 80G",
		},
		{
			name:  "not enough GPUs",
			nodes: []*structs.Node{gpuNode("n1", 4, "A100", 80)},
			job:   job("j", 8),
			want:  "1 node: not enough free GPUs",
		},
		{
			name:  "unhealthy GPUs are not free",
			nodes: []*structs.Node{gpuNode("n1", 4, "A100", 80, withUnhealthy(0, 3))},
			job:   job("j", 3),
			want:  "1 node: not enough free GPUs: some unhealthy",
		},
		{
			name:  "cordoned GPUs are not free",
			nodes: []*structs.Node{gpuNode("n1", 4, "A100", 80, withCordoned(1, 2))},
			job:   job("j", 3),
			want:  "1 node: not enough free GPUs: some cordoned",
		},
		{
			name:  "GPUs with foreign processes are not free",
			nodes: []*structs.Node{gpuNode("n1", 2, "A100", 80, withForeign(false, 0))},
			job:   job("j", 2),
			want:  "1 node: not enough free GPUs: some in use by processes skein did not start",
		},
		{
			name:  "the most common out-of-service cause is named",
			nodes: []*structs.Node{gpuNode("n1", 4, "A100", 80, withCordoned(0), withForeign(false, 1, 2))},
			job:   job("j", 4),
			want:  "1 node: not enough free GPUs: some in use by processes skein did not start",
		},
		{
			name:  "out-of-service GPUs that would not be enough anyway",
			nodes: []*structs.Node{gpuNode("n1", 2, "A100", 80, withCordoned(0))},
			job:   job("j", 3),
			want:  "1 node: not enough free GPUs",
		},
		{
			name:   "GPUs held by live allocations are not free",
			nodes:  []*structs.Node{gpuNode("n1", 4, "A100", 80)},
			allocs: []*structs.Allocation{running("old", "n1", 0, 0, "n1-g1", "n1-g2")},
			job:    job("j", 3),
			want:   "1 node: not enough free GPUs",
		},
		{
			name:  "unhealthy GPUs of the model are not free",
			nodes: []*structs.Node{gpuNode("n1", 2, "A100", 80, withUnhealthy(0, 1))},
			job:   job("j", 1, model("a100")),
			want:  "1 node: not enough free GPUs: some unhealthy",
		},
		{
			name:  "not enough CPUs",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80, withCPUs(8))},
			job:   job("j", 1, cpus(16)),
			want:  "1 node: not enough free CPUs",
		},
		{
			name:   "CPUs used by live allocations",
			nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80, withCPUs(16))},
			allocs: []*structs.Allocation{running("old", "n1", 12, 0)},
			job:    job("j", 1, cpus(8)),
			want:   "1 node: not enough free CPUs",
		},
		{
			name:  "not enough memory",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80, withMemGiB(64))},
			job:   job("j", 1, memGiB(128)),
			want:  "1 node: not enough free memory",
		},
		{
			name:   "memory used by live allocations",
			nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80, withMemGiB(64))},
			allocs: []*structs.Allocation{running("old", "n1", 0, 60<<10)},
			job:    job("j", 1, memGiB(8)),
			want:   "1 node: not enough free memory",
		},
		{
			name: "reasons sorted by count then text",
			nodes: []*structs.Node{
				gpuNode("n1", 2, "A100", 80),
				gpuNode("n2", 2, "A100", 80),
				gpuNode("n3", 2, "A100", 80),
				gpuNode("n4", 8, "H100", 80),
			},
			job:  job("j", 4, model("A100")),
			want: "3 nodes: not enough free GPUs; 1 node: gpu_model A100 required",
		},
		{
			name: "equal counts sorted by text",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80, withStatus(structs.NodeDown)),
				gpuNode("n2", 8, "A100", 80, withCPUs(1)),
			},
			job:  job("j", 1, cpus(2)),
			want: "1 node: node down; 1 node: not enough free CPUs",
		},
		{
			name: "gang with too few feasible nodes",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80),
				gpuNode("n2", 8, "A100", 80),
				gpuNode("n3", 2, "A100", 80),
				gpuNode("n4", 2, "A100", 80),
			},
			job:  job("j", 8, gang(4)),
			want: "needs 4 nodes, 2 feasible; 2 nodes: not enough free GPUs",
		},
		{
			name:  "gang larger than the cluster",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80), gpuNode("n2", 8, "A100", 80)},
			job:   job("j", 1, gang(3)),
			want:  "needs 3 nodes, 2 feasible",
		},
		{
			name:  "negative GPUs",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80)},
			job:   job("j", -1),
			want:  "invalid spec: gpus -1 is negative",
		},
		{
			name:  "negative memory",
			nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80)},
			job:   job("j", 1, func(s *structs.JobSpec) { s.MemoryMiB = -5 }),
			want:  "invalid spec: memory_mib -5 is negative",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Place(fakeState{nodes: tc.nodes, allocs: tc.allocs}, []*structs.Job{tc.job})
			if len(plan.Placements) != 0 {
				t.Fatalf("placed %v, want blocked", plan.Placements)
			}
			if got := blockedReason(plan, tc.job.ID); got != tc.want {
				t.Fatalf("reason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPlace_ChoosesNodeAndGPUs(t *testing.T) {
	cases := []struct {
		name   string
		nodes  []*structs.Node
		allocs []*structs.Allocation
		job    *structs.Job
		want   []string
	}{
		{
			name:  "gpu model matches case-insensitive substring",
			nodes: []*structs.Node{gpuNode("n1", 2, "NVIDIA A100-SXM4-80GB", 80)},
			job:   job("j", 1, model("a100")),
			want:  []string{"n1:[n1-g0]"},
		},
		{
			name: "only GPUs of the model and memory are chosen",
			nodes: []*structs.Node{{
				ID: "n1", Status: structs.NodeReady, GPUs: []structs.GPU{
					{Index: 0, UUID: "u0", Model: "H100", MemoryMiB: 80 << 10, Healthy: true},
					{Index: 1, UUID: "u1", Model: "A100", MemoryMiB: 40 << 10, Healthy: true},
					{Index: 2, UUID: "u2", Model: "A100", MemoryMiB: 80 << 10, Healthy: true},
					{Index: 3, UUID: "u3", Model: "A100", MemoryMiB: 80 << 10, Healthy: true},
				},
			}},
			job:  job("j", 2, model("A100"), gpuMemGiB(80)),
			want: []string{"n1:[u2 u3]"},
		},
		{
			name:   "lowest-indexed free GPUs",
			nodes:  []*structs.Node{gpuNode("n1", 8, "A100", 80)},
			allocs: []*structs.Allocation{running("old", "n1", 0, 0, "n1-g0", "n1-g2")},
			job:    job("j", 2),
			want:   []string{"n1:[n1-g1 n1-g3]"},
		},
		{
			name: "GPUs in ascending index order whatever the inventory order",
			nodes: []*structs.Node{{
				ID: "n1", Status: structs.NodeReady, GPUs: []structs.GPU{
					{Index: 3, UUID: "u3", Model: "A100", Healthy: true},
					{Index: 1, UUID: "u1", Model: "A100", Healthy: true},
					{Index: 2, UUID: "u2", Model: "A100", Healthy: true},
				},
			}},
			job:  job("j", 2),
			want: []string{"n1:[u1 u2]"},
		},
		{
			name:  "unhealthy GPUs never chosen",
			nodes: []*structs.Node{gpuNode("n1", 4, "A100", 80, withUnhealthy(0, 1))},
			job:   job("j", 2),
			want:  []string{"n1:[n1-g2 n1-g3]"},
		},
		{
			name:  "cordoned GPUs and GPUs with foreign processes never chosen",
			nodes: []*structs.Node{gpuNode("n1", 4, "A100", 80, withCordoned(0), withForeign(false, 1))},
			job:   job("j", 2),
			want:  []string{"n1:[n1-g2 n1-g3]"},
		},
		{
			name:  "foreign processes allowed by the node",
			nodes: []*structs.Node{gpuNode("n1", 2, "A100", 80, withForeign(true, 0))},
			job:   job("j", 2),
			want:  []string{"n1:[n1-g0 n1-g1]"},
		},
		{
			name:  "terminal allocations hold nothing",
			nodes: []*structs.Node{gpuNode("n1", 1, "A100", 80)},
			allocs: []*structs.Allocation{func() *structs.Allocation {
				a := running("old", "n1", 0, 0, "n1-g0")
				a.State = structs.AllocFailed
				return a
			}()},
			job:  job("j", 1),
			want: []string{"n1:[n1-g0]"},
		},
		{
			name: "a GPU UUID found twice in the inventory is never handed out",
			nodes: []*structs.Node{
				{ID: "n1", Status: structs.NodeReady, GPUs: []structs.GPU{
					{Index: 0, UUID: "dup", Model: "A100", Healthy: true},
					{Index: 1, UUID: "u1", Model: "A100", Healthy: true},
				}},
				{ID: "n2", Status: structs.NodeReady, GPUs: []structs.GPU{{Index: 0, UUID: "dup", Model: "A100", Healthy: true}}},
			},
			job:  job("j", 1),
			want: []string{"n1:[u1]"},
		},
		{
			name:   "a GPU held by a live allocation is busy whatever node the allocation names",
			nodes:  []*structs.Node{gpuNode("n1", 2, "A100", 80)},
			allocs: []*structs.Allocation{running("old", "elsewhere", 0, 0, "n1-g0")},
			job:    job("j", 1),
			want:   []string{"n1:[n1-g1]"},
		},
		{
			name:  "node without CPU count does not filter on CPUs",
			nodes: []*structs.Node{gpuNode("n1", 1, "A100", 80, withCPUs(0))},
			job:   job("j", 1, cpus(128)),
			want:  []string{"n1:[n1-g0]"},
		},
		{
			name:  "node without memory size does not filter on memory",
			nodes: []*structs.Node{gpuNode("n1", 1, "A100", 80, withMemGiB(0))},
			job:   job("j", 1, memGiB(4096)),
			want:  []string{"n1:[n1-g0]"},
		},
		{
			name: "all constraints must match",
			nodes: []*structs.Node{
				gpuNode("n1", 1, "A100", 80, withLabels("zone", "a", "rack", "r1")),
				gpuNode("n2", 1, "A100", 80, withLabels("zone", "a", "rack", "r2")),
			},
			job:  job("j", 1, constraint("zone", "a"), constraint("rack", "r2")),
			want: []string{"n2:[n2-g0]"},
		},
		{
			name: "binpack prefers the node left with fewest free GPUs",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80),
				gpuNode("n2", 8, "A100", 80),
			},
			allocs: []*structs.Allocation{running("old", "n2", 0, 0, "n2-g0", "n2-g1", "n2-g2", "n2-g3", "n2-g4")},
			job:    job("j", 2),
			want:   []string{"n2:[n2-g5 n2-g6]"},
		},
		{
			name: "spread prefers the node left with most free GPUs",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80),
				gpuNode("n2", 8, "A100", 80),
			},
			allocs: []*structs.Allocation{running("old", "n2", 0, 0, "n2-g0", "n2-g1", "n2-g2", "n2-g3", "n2-g4")},
			job:    job("j", 2, spreadOut),
			want:   []string{"n1:[n1-g0 n1-g1]"},
		},
		{
			name: "binpack counts only matching GPUs",
			nodes: []*structs.Node{
				{ID: "n1", Status: structs.NodeReady, GPUs: []structs.GPU{
					{Index: 0, UUID: "a0", Model: "A100", Healthy: true},
					{Index: 1, UUID: "h1", Model: "H100", Healthy: true},
					{Index: 2, UUID: "h2", Model: "H100", Healthy: true},
				}},
				gpuNode("n2", 2, "A100", 80),
			},
			job:  job("j", 1, model("A100")),
			want: []string{"n1:[a0]"},
		},
		{
			name: "binpack tie goes to fewer free CPUs",
			nodes: []*structs.Node{
				gpuNode("n1", 4, "A100", 80, withCPUs(32)),
				gpuNode("n2", 4, "A100", 80, withCPUs(16)),
			},
			job:  job("j", 1, cpus(4)),
			want: []string{"n2:[n2-g0]"},
		},
		{
			name: "full tie goes to the lower node ID",
			nodes: []*structs.Node{
				gpuNode("n-b", 4, "A100", 80),
				gpuNode("n-a", 4, "A100", 80),
			},
			job:  job("j", 1),
			want: []string{"n-a:[n-a-g0]"},
		},
		{
			name: "CPU-only job goes where no GPU stays idle",
			nodes: []*structs.Node{
				gpuNode("gpu", 8, "A100", 80),
				gpuNode("cpu", 0, "", 0),
			},
			job:  job("j", 0, cpus(4)),
			want: []string{"cpu:[]"},
		},
		{
			name: "gang on distinct nodes, rank 0 on the best scored",
			nodes: []*structs.Node{
				gpuNode("n1", 8, "A100", 80),
				gpuNode("n2", 4, "A100", 80),
				gpuNode("n3", 6, "A100", 80),
			},
			job:  job("j", 4, gang(3)),
			want: []string{"n2:[n2-g0 n2-g1 n2-g2 n2-g3]", "n3:[n3-g0 n3-g1 n3-g2 n3-g3]", "n1:[n1-g0 n1-g1 n1-g2 n1-g3]"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan := Place(fakeState{nodes: tc.nodes, allocs: tc.allocs}, []*structs.Job{tc.job})
			if got := placedOn(plan, tc.job.ID); !slices.Equal(got, tc.want) {
				t.Fatalf("placed %v, want %v (blocked: %q)", got, tc.want, blockedReason(plan, tc.job.ID))
			}
		})
	}
}

func TestPlace_AllocationCarriesJobAndRank(t *testing.T) {
	j := job("j1", 2, gang(2), cpus(8), memGiB(32))
	j.Attempts = 2
	nodes := []*structs.Node{gpuNode("n1", 2, "A100", 80), gpuNode("n2", 2, "A100", 80)}
	plan := Place(fakeState{nodes: nodes}, []*structs.Job{j})
	want := []structs.JobPlacement{{JobID: "j1", Allocations: []structs.Allocation{
		{JobID: "j1", NodeID: "n1", Rank: 0, Attempt: 3, GPUs: []string{"n1-g0", "n1-g1"}, CPUs: 8, MemoryMiB: 32 << 10,
			State: structs.AllocPending, DesiredState: structs.DesiredRun},
		{JobID: "j1", NodeID: "n2", Rank: 1, Attempt: 3, GPUs: []string{"n2-g0", "n2-g1"}, CPUs: 8, MemoryMiB: 32 << 10,
			State: structs.AllocPending, DesiredState: structs.DesiredRun},
	}}}
	if !reflect.DeepEqual(plan.Placements, want) || len(plan.Blocked) != 0 {
		t.Fatalf("plan = %+v, want placements %+v", plan, want)
	}
}

func TestPlace_EarlierJobsConsumeResourcesForLaterOnes(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "A100", 80, withCPUs(16))}
	plan := Place(fakeState{nodes: nodes}, []*structs.Job{
		job("a", 4), job("b", 3, cpus(12)), job("c", 1), job("d", 1, cpus(8)),
	})
	checks := []struct{ job, want string }{
		{"a", "n1:[n1-g0 n1-g1 n1-g2 n1-g3]"},
		{"b", "n1:[n1-g4 n1-g5 n1-g6]"},
		{"c", "n1:[n1-g7]"},
	}
	for _, c := range checks {
		if got := placedOn(plan, c.job); len(got) != 1 || got[0] != c.want {
			t.Errorf("job %s placed %v, want %s", c.job, got, c.want)
		}
	}
	if got, want := blockedReason(plan, "d"), "1 node: not enough free GPUs"; got != want {
		t.Errorf("job d reason %q, want %q", got, want)
	}
}

func TestPlace_SkipsJobThatDoesNotFitAndPlacesSmallerOnes(t *testing.T) {
	nodes := []*structs.Node{gpuNode("n1", 8, "A100", 80), gpuNode("n2", 8, "A100", 80)}
	plan := Place(fakeState{nodes: nodes}, []*structs.Job{job("big", 16), job("gang", 8, gang(3)), job("small", 2)})
	if got := blockedReason(plan, "big"); got != "2 nodes: not enough free GPUs" {
		t.Errorf("big reason %q", got)
	}
	if got := blockedReason(plan, "gang"); got != "needs 3 nodes, 2 feasible" {
		t.Errorf("gang reason %q", got)
	}
	if got := placedOn(plan, "small"); !slices.Equal(got, []string{"n1:[n1-g0 n1-g1]"}) {
		t.Errorf("small placed %v", got)
	}
	if len(plan.Placements) != 1 || len(plan.Blocked) != 2 {
		t.Errorf("plan has %d placements and %d blocked, want 1 and 2", len(plan.Placements), len(plan.Blocked))
	}
}

func TestPlace_BlockedGangTakesNothing(t *testing.T) {
	// The gang needs 3 nodes with 4 GPUs; only 2 have them. Had it taken GPUs
	// on those two, the 8-GPU job behind it could not be placed on n1.
	nodes := []*structs.Node{
		gpuNode("n1", 8, "A100", 80),
		gpuNode("n2", 4, "A100", 80),
		gpuNode("n3", 2, "A100", 80),
	}
	plan := Place(fakeState{nodes: nodes}, []*structs.Job{job("gang", 4, gang(3)), job("whole", 8), job("four", 4)})
	if got := blockedReason(plan, "gang"); got != "needs 3 nodes, 2 feasible; 1 node: not enough free GPUs" {
		t.Errorf("gang reason %q", got)
	}
	if got := placedOn(plan, "whole"); !slices.Equal(got, []string{"n1:[n1-g0 n1-g1 n1-g2 n1-g3 n1-g4 n1-g5 n1-g6 n1-g7]"}) {
		t.Errorf("whole placed %v", got)
	}
	if got := placedOn(plan, "four"); !slices.Equal(got, []string{"n2:[n2-g0 n2-g1 n2-g2 n2-g3]"}) {
		t.Errorf("four placed %v", got)
	}
}

func TestPlace_JobListedTwiceIsPlannedOnce(t *testing.T) {
	j := job("j", 1)
	plan := Place(fakeState{nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80)}}, []*structs.Job{j, nil, j})
	if len(plan.Placements) != 1 || len(plan.Blocked) != 0 {
		t.Fatalf("plan = %+v, want one placement", plan)
	}
}

func TestPlace_NoJobsGiveEmptyPlan(t *testing.T) {
	plan := Place(fakeState{nodes: []*structs.Node{gpuNode("n1", 8, "A100", 80)}}, nil)
	if len(plan.Placements) != 0 || len(plan.Blocked) != 0 {
		t.Fatalf("plan = %+v, want empty", plan)
	}
}

func TestPlace_IsDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	models := []string{"A100", "H100", "L4"}
	var nodes []*structs.Node
	for i := range 200 {
		n := gpuNode(string(rune('a'+i%26))+"-"+string(rune('a'+i/26)), rng.IntN(9), models[rng.IntN(3)], 40+40*rng.Int64N(2),
			withCPUs(8*rng.IntN(9)), withLabels("zone", models[rng.IntN(3)]))
		if rng.IntN(10) == 0 {
			n.Status = structs.NodeDown
		}
		nodes = append(nodes, n)
	}
	var jobs []*structs.Job
	for i := range 300 {
		opts := []func(*structs.JobSpec){cpus(rng.IntN(16)), gang(1 + rng.IntN(3))}
		if rng.IntN(3) == 0 {
			opts = append(opts, model(models[rng.IntN(3)]))
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, constraint("zone", models[rng.IntN(3)]))
		}
		jobs = append(jobs, job(string(rune('A'+i%26))+string(rune('A'+i/26)), rng.IntN(5), opts...))
	}
	first := Place(fakeState{nodes: nodes}, jobs)
	second := Place(fakeState{nodes: nodes}, jobs)
	if !reflect.DeepEqual(first, second) {
		t.Fatal("two passes over the same input gave different plans")
	}
	shuffled := slices.Clone(nodes)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if third := Place(fakeState{nodes: shuffled}, jobs); !reflect.DeepEqual(first, third) {
		t.Fatal("the order nodes are listed in changed the plan")
	}
	if len(first.Placements) == 0 || len(first.Blocked) == 0 {
		t.Fatalf("want a mix of placed and blocked jobs, got %d and %d", len(first.Placements), len(first.Blocked))
	}
}
