package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/fsm"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// drainNode drains (or undrains) node i through node0's API.
func (tc *testCluster) drainNode(i int, on bool, deadline time.Duration) {
	tc.t.Helper()
	req := api.NodeDrainRequest{Deadline: structs.Duration(deadline), Reason: "test"}
	if _, err := tc.client(tc.agents[0]).DrainNode(context.Background(), tc.agents[i].NodeID(), req, on); err != nil {
		tc.t.Fatalf("drain %s (%v): %v", tc.agents[i].Name(), on, err)
	}
}

// A node is drained while it runs a replica of a service under load, one
// rank of a restartable gang, a restartable job that checkpoints on
// SIGUSR1 and a job that cannot run again: the replica's replacement is
// healthy elsewhere before it stops (no request fails), the gang and the
// checkpointing job (which gets its signal) run again on other nodes
// without using a restart, the other job runs on until the drain's
// deadline stops it, and the node ends drained with nothing placed on it
// meanwhile.
func TestCluster_NodeDrain_MovesServicesAndRestartableJobsAndStopsTheRestAtTheDeadline(t *testing.T) {
	t.Parallel()
	bin := testutil.Workload(t)
	shared := testutil.SharedDir(t)
	tc := startClusterWith(t, 3, func(i int, cfg *Config) { cfg.IngressPort = -1 })
	ctx := context.Background()
	c := tc.client(tc.agents[0])
	node2 := tc.agents[2].NodeID()

	// Only node2 takes work while the first jobs are placed.
	tc.drainNode(0, true, 0)
	tc.drainNode(1, true, 0)
	spec := structs.ServiceSpec{
		Job: structs.JobSpec{Command: []string{bin, "--dir", shared, "--serve-port-env", "PORT"}},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond), Failures: 3},
		DrainTimeout: structs.Duration(5 * time.Second),
	}
	if _, err := c.CreateService(ctx, api.ServiceCreateRequest{Name: "web", Replicas: 1, Spec: spec}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	ckptScript := fmt.Sprintf(`trap 'echo "$SKEIN_ATTEMPT" > %s/ckpt-signalled; exit 0' USR1
		[ "$SKEIN_ATTEMPT" -gt 1 ] && exit 0
		sleep 600 & wait`, shared)
	ckpt := tc.submit(tc.agents[0], structs.JobSpec{Name: "ckpt", Nodes: 1, GPUs: 1, Restarts: 1,
		TimeLimit: structs.Duration(time.Hour), Signal: &structs.TimeSignal{Name: "USR1", Before: structs.Duration(time.Minute)},
		Command: []string{"sh", "-c", ckptScript}})
	plain := tc.submit(tc.agents[0], structs.JobSpec{Name: "plain", Nodes: 1, GPUs: 1, Command: []string{"sleep", "600"}})
	waitReplicas(t, tc.agents[0], "web", 1, true)
	for _, id := range []string{ckpt.ID, plain.ID} {
		waitJob(t, tc.agents[0], id, jobState(structs.JobRunning))
	}
	// The gang spans node1 and node2.
	tc.drainNode(1, false, 0)
	gang := tc.submit(tc.agents[0], structs.JobSpec{Name: "gang", Nodes: 2, GPUs: 1, Restarts: 1,
		Command: []string{"sh", "-c", `[ "$SKEIN_ATTEMPT" -gt 1 ] && exit 0; exec sleep 600`}})
	waitJob(t, tc.agents[0], gang.ID, jobState(structs.JobRunning))
	for _, a := range tc.agents[0].fsm.NodeLiveAllocs(tc.agents[1].NodeID()) {
		if a.JobID != gang.ID {
			t.Fatalf("job %s was placed on node1 while it drained", a.JobID)
		}
	}
	tc.drainNode(0, false, 0)

	l := startLoad(t, tc.agents[0], tc.admin, 4, 5)
	time.Sleep(300 * time.Millisecond) // some load before the drain
	const deadline = 20 * time.Second
	tc.drainNode(2, true, deadline)
	drainedAt := time.Now()

	// The gang and ckpt run again elsewhere, without using a restart.
	for _, id := range []string{gang.ID, ckpt.ID} {
		waitJob(t, tc.agents[0], id, jobState(structs.JobSucceeded))
		j, _ := tc.agents[0].fsm.Job(id)
		if j.Attempts != 2 || j.Evictions != 1 || j.RestartsUsed() != 0 {
			t.Errorf("%s: %d attempts, %d evictions, %d restarts used; want 2, 1, 0", j.Spec.Name, j.Attempts, j.Evictions, j.RestartsUsed())
		}
		for _, a := range attemptAllocs(tc.agents[0].fsm.Allocs(id), 2) {
			if a.NodeID == node2 {
				t.Errorf("%s's attempt 2 rank %d ran on the draining node", j.Spec.Name, a.Rank)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(shared, "ckpt-signalled")); err != nil || strings.TrimSpace(string(b)) != "1" {
		t.Errorf("ckpt was not sent SIGUSR1 in its first attempt: %q, %v", b, err)
	}
	// The replica moved: one replica, healthy, on another node.
	testutil.WaitFor(t, 30*time.Second, func() error {
		reps := runningReplicas(tc.agents[0], "web", nil)
		if len(reps) != 1 || reps[0].NodeID == node2 {
			return fmt.Errorf("%d running replicas: %s", len(reps), replicaStates(tc.agents[0]))
		}
		return nil
	})
	// plain runs on until the deadline, then is stopped.
	if j, _ := tc.agents[0].fsm.Job(plain.ID); j.State != structs.JobRunning && time.Since(drainedAt) < deadline-2*time.Second {
		t.Errorf("plain is %s before the deadline (%s)", j.State, j.Reason)
	}
	testutil.WaitFor(t, deadline+20*time.Second, func() error {
		j, _ := tc.agents[0].fsm.Job(plain.ID)
		if j.State != structs.JobFailed {
			return fmt.Errorf("plain is %s (%s)", j.State, j.Reason)
		}
		return nil
	})
	if took := time.Since(drainedAt); took < deadline {
		t.Errorf("plain was stopped %s after the drain, before its deadline of %s", took.Round(time.Millisecond), deadline)
	}
	testutil.WaitFor(t, 20*time.Second, func() error {
		n, _ := tc.agents[1].fsm.Node(node2)
		if n.StatusText() != "drained" {
			return fmt.Errorf("node2 is %s", n.StatusText())
		}
		return nil
	})
	l.check(t, 50)

	// The events say what moved.
	var kinds []string
	for _, e := range tc.agents[0].fsm.Events(fsm.EventQuery{Node: node2}).Events {
		kinds = append(kinds, string(e.Kind))
	}
	all := strings.Join(kinds, " ")
	for _, want := range []structs.EventKind{structs.EventNodeDrain, structs.EventNodeDrainMoved, structs.EventNodeDrained} {
		if !strings.Contains(all, string(want)) {
			t.Errorf("node2's events %v lack %s", kinds, want)
		}
	}
	tc.checkInvariants()
}
