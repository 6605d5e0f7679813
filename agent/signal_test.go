package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// scancel --signal through a node that runs no rank of the job: the
// signal reaches the job's processes on both of its nodes, which trap
// it and go on; bob may not signal alice's job.
func TestSignal_ReachesEveryRankThroughANodeThatRunsNone(t *testing.T) {
	tc := startClusterWith(t, 3, func(_ int, cfg *Config) { securePTYCluster(cfg) })
	alice, bob := ptyUsers(t, tc)
	ctx := context.Background()
	// Two ranks that fill a node each: the third node runs none.
	job, err := clientFor(t, tc.agents[0], alice).SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(),
		Spec: structs.JobSpec{Nodes: 2, GPUs: 4, Command: []string{"sh", "-c",
			`trap 'echo got >> usr1' USR1; echo ready > ready; while :; do sleep 0.1; done`}}})
	if err != nil {
		t.Fatal(err)
	}
	var via *Agent
	testutil.WaitFor(t, 20*time.Second, func() error {
		on := map[string]bool{}
		for _, a := range tc.agents[0].fsm.Allocs(job.ID) {
			if a.State == structs.AllocRunning {
				on[a.NodeID] = true
			}
		}
		if len(on) != 2 {
			return fmt.Errorf("%d ranks of job %s run", len(on), job.SlurmID())
		}
		for _, a := range tc.agents {
			if !on[a.nodeID] {
				via = a
			}
		}
		return nil
	})
	c := clientFor(t, via, alice)
	for rank := range 2 {
		testutil.WaitFor(t, 15*time.Second, func() error {
			_, err := c.Exec(ctx, job.ID, api.ExecRequest{Rank: rank, Command: []string{"cat", "ready"}})
			return err
		})
	}

	_, err = clientFor(t, via, bob).SignalJob(ctx, job.ID, "USR1")
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden {
		t.Fatalf("bob signals alice's job: %v, want 403", err)
	}
	var res *api.SignalResult
	// The node asked may not have heard yet that both ranks run.
	testutil.WaitFor(t, 10*time.Second, func() error {
		res, err = c.SignalJob(ctx, job.ID, "sigusr1")
		if err == nil && len(res.Signalled) != 2 {
			return fmt.Errorf("signalled %+v, want both ranks", res.Signalled)
		}
		return err
	})
	if res.Signal != "USR1" || res.Signalled[0].Rank != 0 || res.Signalled[1].Rank != 1 || res.Signalled[0].SlurmID != job.SlurmID() {
		t.Errorf("signal answered %+v, want USR1 to ranks 0 and 1 of job %s", res, job.SlurmID())
	}
	for rank := range 2 {
		testutil.WaitFor(t, 10*time.Second, func() error {
			out, err := c.Exec(ctx, job.ID, api.ExecRequest{Rank: rank, Command: []string{"cat", "usr1"}})
			if err == nil && out.Output != "got\n" {
				return fmt.Errorf("rank %d's trap wrote %q", rank, out.Output)
			}
			return err
		})
	}
	if j, _ := tc.agents[0].fsm.Job(job.ID); j.State != structs.JobRunning || j.StopRequested {
		t.Errorf("after USR1 job %s is %s (stop requested %v), want it running on", job.SlurmID(), j.State, j.StopRequested)
	}
}

// Through a worker, for a job on another worker: the first passes the
// signal to a server, which relays it to the second, which finds the job
// in its own view.
func TestSignal_ThroughAWorkerToAJobOnAnotherWorker(t *testing.T) {
	tc := startWorkerClusterWith(t, 3, 1, func(_ int, cfg *Config) { securePTYCluster(cfg) })
	alice, _ := ptyUsers(t, tc)
	ctx := context.Background()
	workers := tc.workers()
	for range 3 {
		job, err := clientFor(t, tc.agents[0], alice).SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(),
			Spec: structs.JobSpec{GPUs: 4, Command: []string{"sh", "-c",
				`trap 'echo got >> usr1' USR1; echo ready > ready; while :; do sleep 0.1; done`}}})
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, tc.agents[0], job.ID, runningAlloc)
		if tc.agents[0].fsm.Allocs(job.ID)[0].NodeID != workers[0].nodeID {
			continue
		}
		c := clientFor(t, workers[1], alice)
		testutil.WaitFor(t, 15*time.Second, func() error {
			_, err := c.Exec(ctx, job.ID, api.ExecRequest{Command: []string{"cat", "ready"}})
			return err
		})
		res, err := c.SignalJob(ctx, job.SlurmID(), "USR1")
		if err != nil || len(res.Signalled) != 1 || res.Signalled[0].Node != workers[0].Name() {
			t.Fatalf("signal through worker %s: %+v, %v; want rank 0 on %s", workers[1].Name(), res, err, workers[0].Name())
		}
		testutil.WaitFor(t, 10*time.Second, func() error {
			out, err := c.Exec(ctx, job.ID, api.ExecRequest{Command: []string{"cat", "usr1"}})
			if err == nil && out.Output != "got\n" {
				return fmt.Errorf("the trap wrote %q", out.Output)
			}
			return err
		})
		return
	}
	t.Fatalf("no job of three landed on worker %s", workers[0].Name())
}
