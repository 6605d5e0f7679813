package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
	"pgregory.net/rapid"
)

// genCluster draws nodes, live allocations that never share a GPU, and
// queued jobs, small enough that many jobs compete for few GPUs.
func genCluster(t *rapid.T) ([]*structs.Node, []*structs.Allocation, []*structs.Job) {
	models := []string{"A100", "H100"}
	statuses := []structs.NodeStatus{structs.NodeReady, structs.NodeReady, structs.NodeReady, structs.NodeDown, structs.NodeDraining}
	nNodes := rapid.IntRange(0, 6).Draw(t, "nodes")
	var nodes []*structs.Node
	var uuids []string
	for i := range nNodes {
		n := &structs.Node{
			ID:        fmt.Sprintf("n%d", i),
			Status:    rapid.SampledFrom(statuses).Draw(t, "status"),
			CPUs:      rapid.SampledFrom([]int{0, 8, 32}).Draw(t, "cpus"),
			MemoryMiB: rapid.SampledFrom([]int64{0, 64 << 10}).Draw(t, "mem"),
			Labels:    map[string]string{"zone": rapid.SampledFrom([]string{"a", "b"}).Draw(t, "zone")},
		}
		nGPUs := rapid.IntRange(0, 5).Draw(t, "gpus")
		for g := range nGPUs {
			uuid := fmt.Sprintf("n%d-g%d", i, g)
			if rapid.IntRange(0, 9).Draw(t, "dupChance") == 0 {
				uuid = "dup"
			}
			n.GPUs = append(n.GPUs, structs.GPU{
				Index:     rapid.IntRange(0, 7).Draw(t, "index"),
				UUID:      uuid,
				Model:     rapid.SampledFrom(models).Draw(t, "model"),
				MemoryMiB: rapid.SampledFrom([]int64{40 << 10, 80 << 10}).Draw(t, "gpuMem"),
				Healthy:   rapid.IntRange(0, 4).Draw(t, "healthy") > 0,
				Cordoned:  rapid.IntRange(0, 5).Draw(t, "cordoned") == 0,
				// One foreign process, which the node allows half the time.
				ForeignProcesses: rapid.IntRange(0, 5).Draw(t, "foreign") / 5,
				ForeignAllowed:   rapid.Bool().Draw(t, "foreignAllowed"),
			})
			uuids = append(uuids, uuid)
		}
		nodes = append(nodes, n)
	}

	nAllocs := rapid.IntRange(0, 4).Draw(t, "allocs")
	allocs := make([]*structs.Allocation, nAllocs)
	for i := range allocs {
		nodeID := "ghost"
		if len(nodes) > 0 {
			nodeID = rapid.SampledFrom(nodes).Draw(t, "allocNode").ID
		}
		allocs[i] = running(fmt.Sprintf("old%d", i), nodeID,
			rapid.IntRange(0, 8).Draw(t, "allocCPUs"), rapid.SampledFrom([]int64{0, 8 << 10}).Draw(t, "allocMem"))
		allocs[i].Exclusive = rapid.IntRange(0, 3).Draw(t, "allocExclusive") == 0
	}
	if nAllocs > 0 {
		given := map[string]bool{}
		for _, u := range uuids {
			if given[u] {
				continue
			}
			given[u] = true
			if k := rapid.IntRange(-1, nAllocs-1).Draw(t, "holder"); k >= 0 {
				allocs[k].GPUs = append(allocs[k].GPUs, u)
			}
		}
	}

	nJobs := rapid.IntRange(0, 8).Draw(t, "jobs")
	jobs := make([]*structs.Job, nJobs)
	for i := range jobs {
		j := job(fmt.Sprintf("j%d", i), rapid.IntRange(0, 4).Draw(t, "jobGPUs"),
			gang(rapid.IntRange(1, 3).Draw(t, "jobNodes")),
			cpus(rapid.IntRange(0, 16).Draw(t, "jobCPUs")),
			func(s *structs.JobSpec) {
				s.MemoryMiB = rapid.SampledFrom([]structs.SizeMiB{0, 16 << 10}).Draw(t, "jobMem")
			},
			func(s *structs.JobSpec) {
				if s.GPUs > 0 {
					s.GPUModel = rapid.SampledFrom([]string{"", "a100", "H100"}).Draw(t, "jobModel")
					s.GPUMemoryMinMiB = rapid.SampledFrom([]structs.SizeMiB{0, 80 << 10}).Draw(t, "jobGPUMem")
				}
			})
		if rapid.Bool().Draw(t, "constrained") {
			j.Spec.Constraints = map[string]string{"zone": "a"}
		}
		j.Spec.Exclusive = rapid.IntRange(0, 3).Draw(t, "exclusive") == 0
		jobs[i] = j
	}
	return nodes, allocs, jobs
}

func TestPlace_PropertyPlanRespectsEveryInvariant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nodes, allocs, jobs := genCluster(t)
		checkPlan(t, nodes, allocs, jobs, Place(fakeState{nodes: nodes, allocs: allocs}, jobs))
	})
}

// checkPlan fails t unless the plan keeps every invariant: a gang is placed
// whole on distinct ready nodes that meet its constraints, no GPU is handed
// out twice or while held, each GPU suits its job, no node gives more CPUs
// or memory than it has free, no node with a placement runs an
// --exclusive job beside another, and every job is placed or blocked
// (with a reason) exactly once.
func checkPlan(t *rapid.T, nodes []*structs.Node, allocs []*structs.Allocation, jobs []*structs.Job, plan structs.Plan) {
	byID := map[string]*structs.Node{}
	inventory := map[string]int{}
	for _, n := range nodes {
		byID[n.ID] = n
		for _, g := range n.GPUs {
			inventory[g.UUID]++
		}
	}
	held := map[string]string{}
	for _, a := range allocs {
		for _, u := range a.GPUs {
			held[u] = a.JobID
		}
	}
	usedCPUs, usedMem := map[string]int{}, map[string]int64{}
	for _, a := range allocs {
		usedCPUs[a.NodeID] += a.CPUs
		usedMem[a.NodeID] += a.MemoryMiB
	}

	seen := map[string]bool{}
	jobsByID := map[string]*structs.Job{}
	for _, j := range jobs {
		jobsByID[j.ID] = j
	}
	placedCPUs, placedMem := map[string]int{}, map[string]int64{}
	for _, jp := range plan.Placements {
		j := jobsByID[jp.JobID]
		if j == nil || seen[jp.JobID] {
			t.Fatalf("placement for unknown or repeated job %s", jp.JobID)
		}
		seen[jp.JobID] = true
		// A gang is placed whole: one allocation per rank, on distinct nodes.
		if len(jp.Allocations) != j.Spec.Nodes {
			t.Fatalf("job %s has %d allocations, want %d", j.ID, len(jp.Allocations), j.Spec.Nodes)
		}
		onNode := map[string]bool{}
		for rank, a := range jp.Allocations {
			if a.Rank != rank || a.JobID != j.ID || onNode[a.NodeID] {
				t.Fatalf("job %s allocation %d: rank %d job %s node %s", j.ID, rank, a.Rank, a.JobID, a.NodeID)
			}
			onNode[a.NodeID] = true
			n := byID[a.NodeID]
			if n == nil || n.Status != structs.NodeReady {
				t.Fatalf("job %s placed on missing or unready node %s", j.ID, a.NodeID)
			}
			if j.Spec.Constraints != nil && n.Labels["zone"] != j.Spec.Constraints["zone"] {
				t.Fatalf("job %s placed on node %s against its constraints", j.ID, n.ID)
			}
			if len(a.GPUs) != j.Spec.GPUs || a.Exclusive != j.Spec.Exclusive {
				t.Fatalf("job %s rank %d got %d GPUs (exclusive %v), want %d (%v)", j.ID, rank, len(a.GPUs), a.Exclusive,
					j.Spec.GPUs, j.Spec.Exclusive)
			}
			for _, u := range a.GPUs {
				if owner, ok := held[u]; ok {
					t.Fatalf("GPU %s given to %s and %s", u, owner, j.ID)
				}
				held[u] = j.ID
				g := findGPU(n, u)
				if g == nil || inventory[u] != 1 {
					t.Fatalf("GPU %s of job %s is not exactly one GPU of node %s", u, j.ID, n.ID)
				}
				if ok, _ := g.Placeable(); !ok || !strings.Contains(strings.ToLower(g.Model), strings.ToLower(j.Spec.GPUModel)) ||
					g.MemoryMiB < int64(j.Spec.GPUMemoryMinMiB) {
					t.Fatalf("GPU %+v does not suit job %s", *g, j.ID)
				}
			}
			placedCPUs[n.ID] += a.CPUs
			placedMem[n.ID] += a.MemoryMiB
		}
	}
	// Never more CPUs or memory than were free.
	for id, c := range placedCPUs {
		if n := byID[id]; n.CPUs > 0 && c > max(0, n.CPUs-usedCPUs[id]) {
			t.Fatalf("node %s: placed %d CPUs, %d were free", id, c, n.CPUs-usedCPUs[id])
		}
	}
	for id, m := range placedMem {
		if n := byID[id]; n.MemoryMiB > 0 && m > max(0, n.MemoryMiB-usedMem[id]) {
			t.Fatalf("node %s: placed %d MiB, %d were free", id, m, n.MemoryMiB-usedMem[id])
		}
	}
	checkExclusive(t, allocs, plan)
	for _, b := range plan.Blocked {
		if seen[b.JobID] || b.Reason == "" {
			t.Fatalf("job %s blocked twice, after placement or without reason (%q)", b.JobID, b.Reason)
		}
		seen[b.JobID] = true
	}
	if len(seen) != len(jobs) {
		t.Fatalf("%d jobs in, %d accounted for in the plan", len(jobs), len(seen))
	}
}

// checkExclusive fails t if a node that a plan places on runs an
// --exclusive job beside another job, counting its live allocations and
// the plan's placements.
func checkExclusive(t *rapid.T, allocs []*structs.Allocation, plan structs.Plan) {
	type use struct {
		jobs      []string
		exclusive bool
	}
	on := map[string]*use{}
	add := func(node, job string, exclusive bool) *use {
		u := on[node]
		if u == nil {
			u = &use{}
			on[node] = u
		}
		u.jobs = append(u.jobs, job)
		u.exclusive = u.exclusive || exclusive
		return u
	}
	for _, a := range allocs {
		if a.Live() {
			add(a.NodeID, a.JobID, a.Exclusive)
		}
	}
	placed := map[string]bool{}
	for _, p := range plan.Placements {
		for _, a := range p.Allocations {
			add(a.NodeID, p.JobID, a.Exclusive)
			placed[a.NodeID] = true
		}
	}
	for node := range placed {
		if u := on[node]; u.exclusive && len(u.jobs) > 1 {
			t.Fatalf("node %s runs an --exclusive job beside others: %v", node, u.jobs)
		}
	}
}

func findGPU(n *structs.Node, uuid string) *structs.GPU {
	for i := range n.GPUs {
		if n.GPUs[i].UUID == uuid {
			return &n.GPUs[i]
		}
	}
	return nil
}
