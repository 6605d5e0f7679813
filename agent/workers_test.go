package agent

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// startWorkerCluster starts n agents of which Raft holds servers (one
// voter and servers-1 standbys); the others are workers.
func startWorkerCluster(t *testing.T, n, servers int) *testCluster {
	t.Helper()
	tc := startClusterWith(t, n, func(_ int, cfg *Config) { cfg.Voters, cfg.Servers = 1, servers })
	testutil.WaitFor(t, 10*time.Second, func() error {
		if got := len(tc.servers()); got != servers {
			return fmt.Errorf("%d servers, want %d", got, servers)
		}
		return nil
	})
	return tc
}

// workers returns the live agents outside Raft.
func (tc *testCluster) workers() []*Agent {
	var out []*Agent
	for _, a := range tc.live() {
		if !a.holdsState() {
			out = append(out, a)
		}
	}
	return out
}

func TestCluster_Workers_RunAGangAndServeTheAPIOutsideRaft(t *testing.T) {
	tc := startWorkerCluster(t, 3, 1)
	workers := tc.workers()
	if len(workers) != 2 {
		t.Fatalf("%d workers, want 2", len(workers))
	}
	// They stay outside Raft: the leader does not add them as it did
	// every joiner before.
	testutil.Holds(t, time.Second, func() error {
		if got := len(tc.servers()); got != 1 {
			return fmt.Errorf("%d servers, want 1", got)
		}
		return nil
	})
	ctx := context.Background()
	w := tc.client(workers[0])

	// A worker answers reads by asking a server: the whole cluster, each
	// node with its role.
	nodes, err := w.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[structs.NodeRole]int{}
	for _, n := range nodes {
		roles[n.Role]++
	}
	if len(nodes) != 3 || roles[structs.RoleLeader] != 1 || roles[structs.RoleWorker] != 2 {
		t.Fatalf("nodes through a worker: %d with roles %v; want 3: a leader and 2 workers", len(nodes), roles)
	}

	// A gang over all three nodes, submitted through a worker: each rank
	// learns its peers from its node's view.
	job := tc.submit(workers[1], structs.JobSpec{Nodes: 3, GPUs: 1,
		Command: []string{"sh", "-c", `echo "rank $SKEIN_RANK of $NNODES, master $MASTER_ADDR"; sleep 60`}})
	d := waitJobState(t, w, job.ID, structs.JobRunning)
	byNode := map[string]int{}
	for _, a := range d.Allocations {
		byNode[a.NodeID]++
	}
	if len(byNode) != 3 {
		t.Fatalf("the gang's ranks are on %d nodes, want 3", len(byNode))
	}
	for rank := range 3 {
		testutil.WaitFor(t, 10*time.Second, func() error {
			var b bytes.Buffer
			if err := w.Logs(ctx, job.ID, api.LogOptions{Rank: rank, Stream: "stdout"}, &b); err != nil {
				return err
			}
			if want := fmt.Sprintf("rank %d of 3, master 127.0.0.1", rank); !strings.Contains(b.String(), want) {
				return fmt.Errorf("rank %d's output %q, want %q", rank, b.String(), want)
			}
			return nil
		})
	}

	// Cancelled through the other worker: every rank stops, on the
	// workers too.
	if _, err := tc.client(workers[1]).CancelJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, w, job.ID, structs.JobCancelled)
	testutil.WaitFor(t, 15*time.Second, func() error {
		for _, a := range tc.live() {
			if n := len(a.runner.Tracked()); n != 0 {
				return fmt.Errorf("%s still runs %d allocations", a.Name(), n)
			}
		}
		return nil
	})
	tc.checkInvariants()
}

func TestCluster_Workers_AStandbyLostIsReplacedByAWorker(t *testing.T) {
	tc := startWorkerCluster(t, 4, 2)
	lead := tc.leader()
	var standby int
	for i, a := range tc.agents {
		if i != lead && a.holdsState() {
			standby = i
		}
	}
	lost := tc.agents[standby].nodeID
	tc.kill(standby)
	// The leader takes a worker into Raft in the standby's place, and the
	// new standby catches up with the state.
	testutil.WaitFor(t, 20*time.Second, func() error {
		servers := tc.servers()
		if len(servers) != 2 {
			return fmt.Errorf("%d alive servers, want 2", len(servers))
		}
		for _, a := range servers {
			if a.fsm.Index() < tc.agents[lead].fsm.Index()-1 {
				return fmt.Errorf("%s is at index %d, the leader at %d", a.Name(), a.fsm.Index(), tc.agents[lead].fsm.Index())
			}
		}
		return nil
	})
	// Work submitted now runs on the remaining nodes, the dead one
	// marked down.
	job := tc.submit(tc.workers()[0], structs.JobSpec{Nodes: 3, GPUs: 1, Command: []string{"sleep", "60"}})
	waitJobState(t, tc.client(tc.agents[lead]), job.ID, structs.JobRunning)
	if n, ok := tc.agents[lead].fsm.Node(lost); !ok || n.Status != structs.NodeDown {
		t.Fatalf("the lost standby is %v in the state, want down", n)
	}
}
