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
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// labelledCluster starts n nodes labelled node=nodeI, with a lease long
// enough that a leader election never fences a node's jobs.
func labelledCluster(t *testing.T, n int) *testCluster {
	return startClusterWith(t, n, func(i int, cfg *Config) {
		cfg.Labels = map[string]string{"node": fmt.Sprintf("node%d", i)}
		cfg.StopAfter = 3 * time.Second
		cfg.DownAfter = 4 * time.Second
	})
}

// follower returns the index of a live agent that does not lead.
func (tc *testCluster) follower() int {
	return tc.followerWhere("no follower", func(int, *Agent) bool { return true })
}

// lines returns the lines of a file, none if it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestCluster_LeaderKilledMidTimeLimit_JobTimesOutOnceAndIsSignalledOnce:
// the limit is kept by the job's supervisor on its node, so a new leader
// neither loses nor restarts it; the timed-out report reaches the new
// leader and the job ends timed_out after one attempt.
func TestCluster_LeaderKilledMidTimeLimit_JobTimesOutOnceAndIsSignalledOnce(t *testing.T) {
	t.Parallel()
	tc := labelledCluster(t, 3)
	worker := tc.follower()
	out := filepath.Join(testutil.SharedDir(t), "signals")
	job := tc.submit(tc.agents[worker], structs.JobSpec{
		Command: []string{"sh", "-c", `trap 'echo usr1 >> "$0"' USR1; echo run >> "$0.runs"; while :; do sleep 0.05; done`, out},
		GPUs:    1, Restarts: 2,
		TimeLimit:   structs.Duration(3 * time.Second),
		Signal:      &structs.TimeSignal{Name: "USR1", Before: structs.Duration(2 * time.Second)},
		Constraints: map[string]string{"node": tc.agents[worker].Name()},
	})
	waitJob(t, tc.agents[worker], job.ID, runningAlloc)
	// The signal is due 1s into the job; kill the leader once it is out,
	// 2s before the limit.
	testutil.WaitFor(t, 10*time.Second, func() error {
		if n := len(lines(t, out)); n != 1 {
			return fmt.Errorf("signal delivered %d times, want 1", n)
		}
		return nil
	})
	old := tc.leader()
	if old == worker {
		// An election on a loaded machine moved the lead to the job's
		// node: killing it would test a node loss, and leave the test
		// no agent to read the job from.
		t.Fatalf("the job's node %s has come to lead before the leader was killed", tc.agents[worker].Name())
	}
	tc.kill(old)
	if next := tc.leader(); next == old {
		t.Fatal("the killed node still leads")
	}

	waitJob(t, tc.agents[worker], job.ID, jobState(structs.JobTimedOut))
	j, _ := tc.agents[worker].fsm.Job(job.ID)
	allocs := tc.agents[worker].fsm.Allocs(job.ID)
	if j.Attempts != 1 || len(allocs) != 1 || allocs[0].State != structs.AllocTimedOut {
		t.Fatalf("job %s after %d attempts with allocations %+v: want one timed out attempt", j.State, j.Attempts, allocs)
	}
	if ran := allocs[0].FinishedAt.Sub(allocs[0].StartedAt); ran < 3*time.Second {
		t.Errorf("the job ran %s, less than its 3s limit", ran)
	}
	if got := lines(t, out); len(got) != 1 {
		t.Errorf("signal delivered %d times, want once", len(got))
	}
	if got := lines(t, out+".runs"); len(got) != 1 {
		t.Errorf("the job ran %d times, want once", len(got))
	}
	tc.checkInvariants()
}

// TestCluster_LeaderKilledDuringACappedArray_EveryTaskRunsOnceWithinTheCap:
// the array's tasks run on a follower; the leader dies with tasks running
// and queued; the new leader goes on from the committed state, so no task
// runs twice or is skipped and no more than the cap run at once.
func TestCluster_LeaderKilledDuringACappedArray_EveryTaskRunsOnceWithinTheCap(t *testing.T) {
	t.Parallel()
	tc := labelledCluster(t, 3)
	worker := tc.follower()
	runs := filepath.Join(testutil.SharedDir(t), "runs")
	const tasks, limit = 6, 2
	first := tc.submit(tc.agents[worker], structs.JobSpec{
		Command:     []string{"sh", "-c", `echo "$SKEIN_ARRAY_INDEX" >> "$0"; sleep 0.4`, runs},
		GPUs:        1, // 4 GPUs on the worker: only the cap keeps it at 2
		Array:       &structs.ArraySpec{Start: 0, End: tasks - 1, MaxRunning: limit},
		Constraints: map[string]string{"node": tc.agents[worker].Name()},
	})
	arrayID := first.ArrayID
	testutil.WaitFor(t, 20*time.Second, func() error {
		if n := len(lines(t, runs)); n < limit+1 {
			return fmt.Errorf("%d tasks started, waiting for %d", n, limit+1)
		}
		return nil
	})
	old := tc.leader()
	tc.kill(old)
	if next := tc.leader(); next == old {
		t.Fatal("the killed node still leads")
	}

	type span struct{ start, end time.Time }
	var spans []span
	for i := range tasks {
		id := structs.ArrayTaskID(arrayID, i)
		waitJob(t, tc.agents[worker], id, jobState(structs.JobSucceeded))
		j, _ := tc.agents[worker].fsm.Job(id)
		allocs := tc.agents[worker].fsm.Allocs(id)
		if j.Attempts != 1 || len(allocs) != 1 {
			t.Fatalf("task %d: %d attempts, %d allocations; want 1 and 1", i, j.Attempts, len(allocs))
		}
		spans = append(spans, span{allocs[0].StartedAt, allocs[0].FinishedAt})
	}
	count := map[string]int{}
	for _, l := range lines(t, runs) {
		count[l]++
	}
	for i := range tasks {
		if n := count[fmt.Sprint(i)]; n != 1 {
			t.Errorf("task %d ran %d times, want once (runs: %v)", i, n, count)
		}
	}
	// The most tasks running at one instant is reached at some task's
	// start: count, at every start, the tasks running then. (Counting the
	// tasks that overlap a task at any point of its run would count two
	// that ran one after the other beside it.)
	for _, s := range spans {
		running := 0
		for _, o := range spans {
			if !o.start.After(s.start) && s.start.Before(o.end) {
				running++
			}
		}
		if running > limit {
			t.Fatalf("%d tasks ran at %s, the cap is %d: %v", running, s.start.Format(time.StampMicro), limit, spans)
		}
	}
	tc.checkInvariants()
}

// TestCluster_GangRankZeroOnTheNodeWithTheFastestLink: the link speed each
// agent registers decides where rank 0 of a gang goes; every rank sees the
// job's nodes as one sorted host list and the same committed MASTER_PORT.
func TestCluster_GangRankZeroOnTheNodeWithTheFastestLink(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 3, func(i int, cfg *Config) {
		if i == 2 {
			cfg.LinkMbps = 400000
		}
	})
	fast := tc.agents[2]
	job := tc.submit(tc.agents[0], structs.JobSpec{
		Nodes: 3, GPUs: 1,
		Command: []string{"sh", "-c", `echo "$SLURM_JOB_NODELIST $MASTER_PORT"`},
	})
	waitJob(t, tc.agents[0], job.ID, jobState(structs.JobSucceeded))
	allocs := tc.agents[0].fsm.Allocs(job.ID)
	var rank0 *structs.Allocation
	for _, a := range allocs {
		if a.Rank == 0 {
			rank0 = a
		}
	}
	if rank0 == nil || rank0.NodeID != fast.nodeID {
		t.Fatalf("rank 0 is %+v, want it on %s, the node with the fastest link", rank0, fast.Name())
	}
	for rank := range 3 {
		var out strings.Builder
		if err := tc.client(tc.agents[1]).Logs(context.Background(), job.ID, api.LogOptions{Rank: rank, Stream: api.StreamStdout}, &out); err != nil {
			t.Fatal(err)
		}
		nodes, port, _ := strings.Cut(strings.TrimSpace(out.String()), " ")
		want := structs.HostList([]string{tc.agents[0].Name(), tc.agents[1].Name(), fast.Name()})
		if nodes != want || port != fmt.Sprint(rank0.MasterPort) {
			t.Errorf("rank %d sees nodes %q and port %s, want %s and port %d", rank, nodes, port, want, rank0.MasterPort)
		}
	}
}
