package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// startGPUCluster starts n agents with gpus each (a sim: spec) and a GPU
// clean period, the way startCluster does, ACLs included.
func startGPUCluster(t *testing.T, n int, gpus string, clean time.Duration) *testCluster {
	t.Helper()
	testutil.Long(t, "starts a cluster of agents")
	tc := &testCluster{t: t}
	for i := range n {
		cfg := clusterConfig(t, fmt.Sprintf("node%d", i), nil)
		cfg.GPUs = gpus
		cfg.GPUCleanPeriod = clean
		if i > 0 {
			cfg.Join = []string{tc.agents[i-1].raft.GossipAddr()}
		}
		a, err := New(cfg)
		if err != nil {
			t.Fatalf("start node%d: %v", i, err)
		}
		t.Cleanup(a.Shutdown)
		tc.agents = append(tc.agents, a)
	}
	tc.waitReady(n)
	tc.bootstrapACL()
	return tc
}

// gpuOf returns what GET /v1/gpus says of one GPU.
func gpuOf(c *api.Client, node string, index int) (api.GPUInfo, error) {
	gpus, err := c.GPUs(context.Background())
	if err != nil {
		return api.GPUInfo{}, err
	}
	for _, g := range gpus {
		if g.Node == node && g.Index == index {
			return g, nil
		}
	}
	return api.GPUInfo{}, fmt.Errorf("GPU %s/%d not listed", node, index)
}

func TestCluster_GPUFaultUnderARunningJob_JobRunsElsewhereAndTheGPUWaitsOutItsCleanPeriod(t *testing.T) {
	t.Parallel()
	const clean = 5 * time.Second
	tc := startGPUCluster(t, 2, "sim:1xH100-80", clean)
	c := tc.client(tc.agents[0])
	ctx := context.Background()
	job := tc.submit(tc.agents[0], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1})
	waitJob(t, tc.agents[0], job.ID, runningAlloc)
	first := tc.agents[0].fsm.Allocs(job.ID)[0]
	victim := tc.agents[tc.indexOf(first.NodeID)]

	// Inject through the other node: the request is passed to the owner.
	other := tc.agents[1-tc.indexOf(first.NodeID)]
	if err := tc.client(other).InjectGPUFault(ctx, api.GPUFaultRequest{Node: victim.Name(), Index: 0, Reason: "XID 79: GPU has fallen off the bus"}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[0], job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if j.Attempts != 2 || allocs[len(allocs)-1].NodeID != other.NodeID() {
			return fmt.Errorf("attempts %d (%s), want a second attempt on %s", j.Attempts, j.Reason, other.Name())
		}
		return runningAlloc(j, allocs)
	})
	d, err := c.Job(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	a0 := d.Allocations[0]
	want := "GPU 0 on node " + victim.Name() + " unhealthy: XID 79: GPU has fallen off the bus"
	if a0.State != structs.AllocKilled || a0.GPUFault != want || !strings.Contains(a0.Reason, want) || d.Job.GPUFaults != 1 {
		t.Fatalf("first attempt: %s, fault %q, reason %q; job gpu_faults %d", a0.State, a0.GPUFault, a0.Reason, d.Job.GPUFaults)
	}
	g, err := gpuOf(c, victim.Name(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Health != structs.GPUUnhealthy || g.Reason != "XID 79: GPU has fallen off the bus" || !g.Simulated {
		t.Fatalf("failed GPU as listed: %+v", g)
	}
	// Another job does not get the failed GPU: it waits, and says why.
	second := tc.submit(tc.agents[0], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1})
	waitJob(t, tc.agents[0], second.ID, func(j *structs.Job, _ []*structs.Allocation) error {
		if j.State != structs.JobQueued || !strings.Contains(j.Reason, "some unhealthy") {
			return fmt.Errorf("second job %s (%s), want queued for an unhealthy GPU", j.State, j.Reason)
		}
		return nil
	})
	// After the clean period the GPU is back and the job runs on it.
	waitJob(t, tc.agents[0], second.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if err := runningAlloc(j, allocs); err != nil {
			return err
		}
		if allocs[0].NodeID != victim.NodeID() {
			return fmt.Errorf("second job on %s", allocs[0].NodeID)
		}
		return nil
	})
	if g, err := gpuOf(c, victim.Name(), 0); err != nil || g.Health != structs.GPUHealthy || g.Job != second.ID {
		t.Fatalf("GPU after its clean period: %+v, %v", g, err)
	}
	tc.checkInvariants()
}

func TestCluster_UncordonReturnsAFailedGPUAndCordonKeepsWorkOff(t *testing.T) {
	t.Parallel()
	tc := startGPUCluster(t, 2, "sim:1xH100-80", time.Hour)
	ctx := context.Background()
	c := tc.client(tc.agents[1]) // not the leader: writes are forwarded
	if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: "node0", Index: 0, Reason: "XID 48"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CordonGPU(ctx, api.GPURequest{Node: "node1", Index: 0, Reason: "fan noise"}, true); err != nil {
		t.Fatal(err)
	}
	job := tc.submit(tc.agents[1], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1})
	waitJob(t, tc.agents[1], job.ID, func(j *structs.Job, _ []*structs.Allocation) error {
		if j.State != structs.JobQueued || !strings.Contains(j.Reason, "some unhealthy") || !strings.Contains(j.Reason, "some cordoned") {
			return fmt.Errorf("job %s (%s), want queued naming both GPUs", j.State, j.Reason)
		}
		return nil
	})
	testutil.WaitFor(t, 10*time.Second, func() error {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if n.GPUsFree != 0 || n.GPUsUnhealthy+n.GPUsHeldBack != 1 {
				return fmt.Errorf("node %s: %d free, %d unhealthy, %d held back", n.Name, n.GPUsFree, n.GPUsUnhealthy, n.GPUsHeldBack)
			}
		}
		s, err := c.Status(ctx)
		if err == nil && s.GPUsFree != 0 {
			err = fmt.Errorf("status counts %d free GPUs", s.GPUsFree)
		}
		return err
	})
	g, err := c.CordonGPU(ctx, api.GPURequest{Node: "node0", Index: 0}, false)
	if err != nil {
		t.Fatal(err)
	}
	if g.Health != structs.GPUHealthy {
		t.Fatalf("uncordoned GPU: %+v", g)
	}
	waitJob(t, tc.agents[1], job.ID, runningAlloc)
	// A cordon keeps running work running.
	if _, err := c.CordonGPU(ctx, api.GPURequest{Node: "node0", Index: 0}, true); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error { // node1 reads its own copy of the state
		g, err := gpuOf(c, "node0", 0)
		if err == nil && (g.Health != structs.GPUCordoned || g.Job != job.ID) {
			err = fmt.Errorf("cordoned GPU: %s, job %s", g.Health, g.Job)
		}
		return err
	})
	if alloc := tc.agents[1].fsm.Allocs(job.ID)[0]; alloc.DesiredState != structs.DesiredRun {
		t.Fatal("a cordon stopped the job on the GPU")
	}
	// Bad names are refused naming the field.
	if _, err := c.CordonGPU(ctx, api.GPURequest{Node: "node0", Index: 5}, true); err == nil || !strings.Contains(err.Error(), "index: 5: node node0 has GPUs 0..0") {
		t.Fatalf("cordon of a GPU the node lacks: %v", err)
	}
	if _, err := c.CordonGPU(ctx, api.GPURequest{Node: "nope", Index: 0}, true); !api.IsNotFound(err) {
		t.Fatalf("cordon on an unknown node: %v", err)
	}
}

func TestCluster_ForeignProcessesKeepWorkOffAGPU(t *testing.T) {
	t.Parallel()
	tc := startGPUCluster(t, 1, "sim:1xH100-80", time.Hour)
	ctx := context.Background()
	c := tc.client(tc.agents[0])
	if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: "node0", Index: 0, Kind: "processes", PIDs: []uint32{4242, 4243}}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		g, err := gpuOf(c, "node0", 0)
		if err == nil && (g.Health != structs.GPUForeign || g.ForeignProcesses != 2) {
			err = fmt.Errorf("GPU %s with %d foreign processes", g.Health, g.ForeignProcesses)
		}
		return err
	})
	job := tc.submit(tc.agents[0], structs.JobSpec{Command: []string{"sleep", "600"}, GPUs: 1})
	waitJob(t, tc.agents[0], job.ID, func(j *structs.Job, _ []*structs.Allocation) error {
		if j.State != structs.JobQueued || !strings.Contains(j.Reason, "processes skein did not start") {
			return fmt.Errorf("job %s (%s), want queued for foreign processes", j.State, j.Reason)
		}
		return nil
	})
	if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: "node0", Index: 0, Kind: "processes"}); err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[0], job.ID, runningAlloc)
	if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: "node0", Index: 0, Kind: "sometimes"}); err == nil || !strings.Contains(err.Error(), "kind") {
		t.Fatalf("unknown event kind: %v", err)
	}
}

func TestAgent_RestartKeepsACordonAndAQuarantine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.GPUCleanPeriod = time.Hour
	first, admin, c := startAgentAdmin(t, cfg)
	ctx := context.Background()
	if err := c.InjectGPUFault(ctx, api.GPUFaultRequest{Node: cfg.Name, Index: 0, Reason: "XID 79"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CordonGPU(ctx, api.GPURequest{Node: cfg.Name, Index: 1, Reason: "bad fan"}, true); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		g, err := gpuOf(c, cfg.Name, 0)
		if err == nil && g.Health != structs.GPUUnhealthy {
			err = fmt.Errorf("GPU 0 is %s", g.Health)
		}
		return err
	})
	first.Shutdown()

	second, c := restartAgent(t, cfg, admin)
	// The restarted health loop has judged GPU 0 (gossip carries its view)...
	testutil.WaitFor(t, 10*time.Second, func() error {
		if m := second.node.Meta().Unhealthy; m != 1 {
			return fmt.Errorf("unhealthy mask %b, want GPU 0", m)
		}
		return nil
	})
	// ...and neither the new registration nor the new loop cleared anything.
	for i, want := range []string{structs.GPUUnhealthy, structs.GPUCordoned, structs.GPUHealthy} {
		g, err := gpuOf(c, cfg.Name, i)
		if err != nil {
			t.Fatal(err)
		}
		if g.Health != want {
			t.Fatalf("GPU %d after the restart: %s (%s), want %s", i, g.Health, g.Reason, want)
		}
	}
}
