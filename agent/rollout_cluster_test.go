package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/engine"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// availableReplicas counts web's replicas that are wanted (not ended, not
// being stopped) and serve: an allocation that runs, is not being stopped
// and is healthy. It is what a rollout keeps at or above Replicas less
// MaxUnavailable.
func availableReplicas(a *Agent) int {
	n := 0
	for _, j := range wantedReplicas(a) {
		for _, al := range a.fsm.Allocs(j.ID) {
			if al.State == structs.AllocRunning && al.DesiredState != structs.DesiredStop && al.Health != nil && al.Health.Healthy {
				n++
				break
			}
		}
	}
	return n
}

// A rollout of four replicas (surge 1, none unavailable) on node1 and
// node2 whose leader, node0, is killed between steps: a new leader
// continues from the replicated state and makes the remaining replicas,
// and the rollout ends with every replica on the new version. In every
// state a surviving node applied, at least four replicas were available,
// and no replica was lost: the old ones were stopped by the rollout, one
// at a time, and nothing else ended.
func TestCluster_RolloutContinuesAfterTheLeaderIsKilled(t *testing.T) {
	t.Parallel()
	bin := testutil.Workload(t)
	tc := startClusterWith(t, 3, func(i int, cfg *Config) {
		if i > 0 {
			cfg.Labels = map[string]string{"serve": "yes"}
		}
	})
	// node0, which no replica may run on, is to lead: killing it takes
	// the leader away and no replica with it.
	testutil.WaitFor(t, 30*time.Second, func() error {
		lead := tc.leader()
		if lead == 0 {
			return nil
		}
		err := tc.agents[lead].raft.LeadershipTransfer()
		return fmt.Errorf("%s leads, want node0 (transfer: %v)", tc.agents[lead].Name(), err)
	})
	watcher := tc.agents[1]
	c := tc.client(watcher)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const replicas = 4
	spec := structs.ServiceSpec{
		Job: structs.JobSpec{Command: []string{bin, "--dir", testutil.SharedDir(t), "--serve-port-env", "PORT"},
			Env: map[string]string{"MODEL": "v1"}, Constraints: map[string]string{"serve": "yes"}},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(300 * time.Millisecond), Timeout: structs.Duration(300 * time.Millisecond), Failures: 5},
		DrainTimeout: structs.Duration(time.Second),
	}
	if _, err := c.CreateService(ctx, api.ServiceCreateRequest{Name: "web", Replicas: replicas, Spec: spec}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, watcher, "web", replicas, true)

	// The fewest replicas available in any state node1 applies from the
	// update on.
	var mu sync.Mutex
	fewest, fewestAt := replicas, ""
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			_, changed := watcher.fsm.Watch()
			if n := availableReplicas(watcher); n < fewest {
				mu.Lock()
				fewest, fewestAt = n, replicaStates(watcher)
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-changed:
			}
		}
	}()

	next := spec
	next.Job.Env = map[string]string{"MODEL": "v2"}
	if _, err := c.UpdateService(ctx, "web", api.ServiceUpdateRequest{Spec: next}); err != nil {
		t.Fatalf("update: %v", err)
	}
	// Between steps: a replica of version 2 serves, older ones remain.
	var madeBefore int
	testutil.WaitFor(t, 60*time.Second, func() error {
		svc, _ := watcher.fsm.Service("web")
		if svc == nil || svc.Rollout == nil {
			return fmt.Errorf("node1 has not applied the update")
		}
		newHealthy, older := 0, 0
		for _, j := range wantedReplicas(watcher) {
			if j.ServiceVersion == 1 {
				older++
			}
		}
		for _, al := range runningReplicas(watcher, "web", nil) {
			if j, _ := watcher.fsm.Job(al.JobID); j.ServiceVersion == 2 && al.Health != nil && al.Health.Healthy {
				newHealthy++
			}
		}
		if svc.Rollout.State != structs.RolloutRunning || newHealthy == 0 || older < 2 {
			return fmt.Errorf("rollout %s, %d of version 2 healthy, %d older wanted: %s", svc.Rollout.State, newHealthy, older, replicaStates(watcher))
		}
		// A busy machine may have moved the leadership meanwhile: back
		// to node0, which runs no replica, before it is killed.
		if lead := tc.leader(); lead != 0 {
			err := tc.agents[lead].raft.LeadershipTransfer()
			return fmt.Errorf("%s leads, want node0 (transfer: %v)", tc.agents[lead].Name(), err)
		}
		madeBefore = svc.NextReplica
		return nil
	})
	dead := tc.agents[0].NodeID()
	tc.kill(0)

	svc := waitRollout(t, watcher, structs.RolloutDone)
	if tc.leader() == 0 {
		t.Fatal("the killed node leads")
	}
	if svc.NextReplica <= madeBefore {
		t.Fatalf("no replica made after the leader was killed (%d made before, %d in all): the new leader did not continue", madeBefore, svc.NextReplica)
	}
	waitReplicas(t, watcher, "web", replicas, true)
	cancel()
	<-watched

	reps := wantedReplicas(watcher)
	if len(reps) != replicas {
		t.Fatalf("%d replicas wanted after the rollout, want %d: %s", len(reps), replicas, replicaStates(watcher))
	}
	for _, j := range reps {
		if j.ServiceVersion != 2 || j.Spec.Env["MODEL"] != "v2" {
			t.Errorf("replica %s after the rollout: version %d, env %v", j.ID, j.ServiceVersion, j.Spec.Env)
		}
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, j := range watcher.fsm.ServiceReplicas("web") {
			if j.ServiceVersion == 1 && !j.State.Terminal() {
				return fmt.Errorf("old replica %s is %s (%s)", j.ID, j.State, j.Reason)
			}
		}
		return nil
	})
	for _, j := range watcher.fsm.ServiceReplicas("web") {
		if j.ServiceVersion == 1 && j.State != structs.JobCancelled {
			t.Errorf("old replica %s ended %s (%s), want cancelled by the rollout", j.ID, j.State, j.Reason)
		}
		for _, al := range watcher.fsm.Allocs(j.ID) {
			if al.State == structs.AllocLost || al.NodeID == dead {
				t.Errorf("replica %s's allocation %s is %s on %s", j.ID, al.ID, al.State, al.NodeID)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("replicas made: %d before the leader was killed, %d in all; fewest available: %d", madeBefore, svc.NextReplica, fewest)
	if fewest < replicas {
		t.Fatalf("only %d replicas available at one point, want at least %d: %s", fewest, replicas, fewestAt)
	}
	tc.checkInvariants()
}

// replicaStates says how each of web's replicas stands, for failures.
func replicaStates(a *Agent) string {
	var out []string
	for _, j := range a.fsm.ServiceReplicas("web") {
		s := fmt.Sprintf("%s v%d %s", j.ID, j.ServiceVersion, j.State)
		if j.StopRequested {
			s += " stopping"
		}
		for _, al := range a.fsm.Allocs(j.ID) {
			if al.Live() {
				s += fmt.Sprintf(" [%s %s health=%+v]", al.State, al.DesiredState, al.Health)
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// A service of two skein-workload replicas in containers, updated with a
// new env under a steady load through the ingress: the rollout ends with
// both replicas on the new version, each in a running container of its
// own, the old replicas' containers are removed, and no request fails.
func TestRollout_ImageReplicasAreReplacedInNewContainers(t *testing.T) {
	t.Parallel()
	image := testutil.ImageWith(t, testutil.Workload(t))
	shared := testutil.SharedDir(t)
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	cfg.ContainerSocket = DefaultContainerSocket
	cfg.AllowMounts = []string{shared}
	a, token, c := startAgentAdmin(t, cfg)
	testutil.WaitFor(t, 20*time.Second, func() error {
		if n, ok := a.fsm.Node(a.NodeID()); !ok || !n.Containers.Answers() {
			return fmt.Errorf("the node's engine report is not in yet")
		}
		return nil
	})
	spec := structs.ServiceSpec{
		Job: structs.JobSpec{Image: image, Mounts: []structs.Mount{{Source: shared, Target: "/shared"}},
			Command: []string{"skein-workload", "--dir", "/shared", "--serve-port-env", "PORT"},
			Env:     map[string]string{"MODEL": "v1"}},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond), Failures: 3},
		DrainTimeout: structs.Duration(5 * time.Second),
	}
	if _, err := c.CreateService(context.Background(), api.ServiceCreateRequest{Name: "web", Replicas: 2, Spec: spec}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	old := waitReplicas(t, a, "web", 2, true)
	l := startLoad(t, a, token, 4, 100)

	next := spec
	next.Job.Env = map[string]string{"MODEL": "v2"}
	if _, err := c.UpdateService(context.Background(), "web", api.ServiceUpdateRequest{Spec: next}); err != nil {
		t.Fatalf("update: %v", err)
	}
	waitRollout(t, a, structs.RolloutDone)
	testutil.WaitFor(t, 60*time.Second, func() error {
		for _, j := range a.fsm.ServiceReplicas("web") {
			if j.ServiceVersion == 1 && !j.State.Terminal() {
				return fmt.Errorf("old replica %s is %s (%s)", j.ID, j.State, j.Reason)
			}
		}
		return nil
	})
	l.check(t, 20)

	docker, err := engine.NewDocker(DefaultContainerSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	now := waitReplicas(t, a, "web", 2, true)
	for _, al := range now {
		j, _ := a.fsm.Job(al.JobID)
		if j.ServiceVersion != 2 || j.Spec.Env["MODEL"] != "v2" || j.Spec.Image != image {
			t.Errorf("replica %s after the rollout: version %d, env %v, image %q", j.ID, j.ServiceVersion, j.Spec.Env, j.Spec.Image)
		}
		cs, err := docker.List(context.Background(), engine.LabelAlloc, al.ID)
		if err != nil || len(cs) != 1 || !cs[0].Running {
			t.Errorf("replica %s's containers: %+v, %v; want one, running", j.ID, cs, err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, al := range old {
			if cs, err := docker.List(context.Background(), engine.LabelAlloc, al.ID); err != nil || len(cs) != 0 {
				return fmt.Errorf("old replica %s's containers: %+v, %v", al.JobID, cs, err)
			}
		}
		return nil
	})
}
