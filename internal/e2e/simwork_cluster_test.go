package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestSimWorkers_RunWhatIsPlacedAndStopWhenAsked checks the burst
// benchmark's simulated workers against a real agent: a job placed on one
// is reported running by that sim alone, and cancelling it makes the sim
// report it killed, so that the job ends cancelled with its allocation
// killed, as a real node's would.
func TestSimWorkers_RunWhatIsPlacedAndStopWhenAsked(t *testing.T) {
	t.Parallel()
	n := newNodes(t, "127.0.0.171")[0]
	n.start(t)
	admin, err := api.NewClient(n.proc.addr, adminToken(t))
	if err != nil {
		t.Fatal(err)
	}
	sims := newSimWorkers([]string{n.proc.addr}, nil, simRenewEvery, time.Hour)
	t.Cleanup(sims.close)
	sims.grow(t, 2)
	testutil.WaitFor(t, 30*time.Second, func() error { return allReady(admin, 3) })

	ctx := context.Background()
	job, err := admin.SubmitJob(ctx, api.SubmitRequest{RequestID: "sim-check", Spec: structs.JobSpec{
		Command: []string{"true"}, Nodes: 1, GPUs: 1, Constraints: map[string]string{"bench": "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	var placed structs.Allocation
	testutil.WaitFor(t, 30*time.Second, func() error {
		d, err := admin.Job(ctx, job.ID)
		if err != nil {
			return err
		}
		if d.Job.State != structs.JobRunning || len(d.Allocations) != 1 {
			return fmt.Errorf("job %s, %d allocations; want running, 1", d.Job.State, len(d.Allocations))
		}
		placed = d.Allocations[0]
		// The sim records its report once the leader has answered it,
		// which may be after the job is seen running.
		if ran := sims.ledger.job(job.ID); ran == nil || len(ran.runs[0]) != 1 || ran.runs[0][0] != placed.NodeID {
			return fmt.Errorf("sims' runs of the job: %+v; want rank 0 run once, by %s", ran, placed.NodeID)
		}
		return nil
	})

	if _, err := admin.CancelJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		d, err := admin.Job(ctx, job.ID)
		if err != nil {
			return err
		}
		if d.Job.State != structs.JobCancelled || len(d.Allocations) != 1 || d.Allocations[0].State != structs.AllocKilled {
			return fmt.Errorf("job %s, allocations %+v; want cancelled, its allocation killed", d.Job.State, d.Allocations)
		}
		if ran := sims.ledger.job(job.ID); ran.ended != 1 || ran.succeeded != 0 || len(ran.runs[0]) != 1 {
			return fmt.Errorf("sims reported %d ends, %d succeeded, runs %v; want one end, killed, of one run", ran.ended, ran.succeeded, ran.runs)
		}
		return nil
	})
	if n := sims.lostRunning.Load() + sims.refusedReports.Load(); n != 0 {
		t.Fatalf("%d allocations ended under a sim or reports refused; want none", n)
	}
}
