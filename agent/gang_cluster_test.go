package agent

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// attemptAllocs returns the allocations of one attempt, by rank.
func attemptAllocs(allocs []*structs.Allocation, attempt int) []*structs.Allocation {
	var out []*structs.Allocation
	for _, a := range allocs {
		if a.Attempt == attempt {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *structs.Allocation) int { return a.Rank - b.Rank })
	return out
}

// A rank of a gang spanning three nodes fails: the other ranks are stopped
// at once instead of waiting on a dead peer, and the whole gang runs again
// together as the next attempt, on every node.
func TestCluster_GangRankFails_WholeGangStopsAndRunsAgainTogether(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	// Attempt 1: rank 1 fails, the others would wait forever for it.
	// Attempt 2: every rank succeeds.
	script := `if [ "$SKEIN_ATTEMPT" = 1 ]; then
		if [ "$NODE_RANK" = 1 ]; then sleep 0.5; exit 3; fi
		exec sleep 600
	fi
	exit 0`
	job := tc.submit(tc.agents[1], structs.JobSpec{
		Name: "gang", Nodes: 3, GPUs: 2, Restarts: 1,
		Command: []string{"sh", "-c", script},
	})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))

	j, _ := tc.agents[0].fsm.Job(job.ID)
	allocs := tc.agents[0].fsm.Allocs(job.ID)
	if j.Attempts != 2 {
		t.Fatalf("job ran %d attempts, want 2 (%s)", j.Attempts, j.Reason)
	}
	first, second := attemptAllocs(allocs, 1), attemptAllocs(allocs, 2)
	if len(first) != 3 || len(second) != 3 {
		t.Fatalf("attempts have %d and %d allocations, want 3 each", len(first), len(second))
	}
	for _, a := range first {
		want := structs.AllocKilled
		if a.Rank == 1 {
			want = structs.AllocFailed
		}
		if a.State != want {
			t.Errorf("attempt 1 rank %d is %s (%s), want %s", a.Rank, a.State, a.Reason, want)
		}
	}
	if first[1].ExitCode != 3 {
		t.Errorf("the failed rank's exit code is %d, want 3", first[1].ExitCode)
	}
	nodes := map[string]bool{}
	for _, a := range second {
		if a.State != structs.AllocSucceeded {
			t.Errorf("attempt 2 rank %d is %s (%s), want succeeded", a.Rank, a.State, a.Reason)
		}
		nodes[a.NodeID] = true
	}
	if len(nodes) != 3 {
		t.Errorf("attempt 2 ran on %d nodes, want 3", len(nodes))
	}
	tc.checkInvariants()
}

// A node running one rank of a two-node gang is cut off: the rank is lost,
// the rank on the healthy node is stopped with it, and the gang runs again
// as a whole on the two nodes left, once.
func TestCluster_GangNodeLost_WholeGangRunsAgainOnTheNodesLeft(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	job := tc.submit(tc.agents[0], structs.JobSpec{
		Name: "gang", Nodes: 2, GPUs: 4, Restarts: 1,
		Command: []string{"sleep", "600"},
	})
	waitJob(t, tc.agents[0], job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if live := attemptAllocs(allocs, 1); len(live) != 2 || live[0].State != structs.AllocRunning || live[1].State != structs.AllocRunning {
			return fmt.Errorf("attempt 1 not running on both nodes yet")
		}
		return nil
	})
	first := attemptAllocs(tc.agents[0].fsm.Allocs(job.ID), 1)
	victim := tc.indexOf(first[1].NodeID)
	survivor := tc.indexOf(first[0].NodeID)
	tc.isolate(victim)

	watcher := survivor
	waitJob(t, tc.agents[watcher], job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		second := attemptAllocs(allocs, 2)
		if j.Attempts != 2 || len(second) != 2 {
			return fmt.Errorf("attempt %d with %d allocations (%s)", j.Attempts, len(second), j.Reason)
		}
		for _, a := range second {
			if a.State != structs.AllocRunning {
				return fmt.Errorf("attempt 2 rank %d is %s", a.Rank, a.State)
			}
		}
		return nil
	})
	allocs := tc.agents[watcher].fsm.Allocs(job.ID)
	byID := map[string]*structs.Allocation{}
	for _, a := range allocs {
		byID[a.ID] = a
	}
	if a := byID[first[1].ID]; a.State != structs.AllocLost {
		t.Errorf("the cut-off rank is %s, want lost", a.State)
	}
	if a := byID[first[0].ID]; !a.State.Terminal() || a.State == structs.AllocLost {
		t.Errorf("the healthy rank is %s, want stopped with the gang", a.State)
	}
	for _, a := range attemptAllocs(allocs, 2) {
		if a.NodeID == tc.agents[victim].nodeID {
			t.Errorf("attempt 2 rank %d was placed on the cut-off node", a.Rank)
		}
	}
	// The healthy rank's process is gone from its node, not only from the
	// state.
	testutil.WaitFor(t, 10*time.Second, func() error {
		if slices.Contains(tc.agents[survivor].runner.Tracked(), first[0].ID) {
			return fmt.Errorf("node %s still runs attempt 1's rank 0", tc.agents[survivor].Name())
		}
		return nil
	})

	tc.net.Heal()
	tc.waitReady(3)
	tc.checkInvariants()
	if j, _ := tc.agents[victim].fsm.Job(job.ID); j.Attempts != 2 {
		t.Fatalf("after healing the job has %d attempts, want 2", j.Attempts)
	}
	if _, err := tc.client(tc.agents[survivor]).CancelJob(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
}
