package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/structs"
)

// scontrol requeue through the node that does not run the job: its
// allocation stops and it runs again, a second attempt, with no restart
// used (it has none); a finished job is refused, saying why.
func TestRequeue_ARunningJobRunsAgainWithoutARestart(t *testing.T) {
	tc := startCluster(t, 2)
	ctx := context.Background()
	job, runsOn := submitHold(t, tc, tc.client(tc.agents[0]))
	c := tc.client(tc.agents[1-tc.indexOf(runsOn)])
	got, err := c.RequeueJob(ctx, job.SlurmID())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Reason, "requeued with scontrol requeue") {
		t.Errorf("the requeued job's reason %q", got.Reason)
	}
	waitJob(t, tc.agents[0], job.ID, func(j *structs.Job, allocs []*structs.Allocation) error {
		if j.Attempts != 2 || j.RestartsUsed() != 0 || j.Evictions != 1 {
			return fmt.Errorf("job %s: attempt %d, restarts used %d, evictions %d (%s: %s)", j.SlurmID(), j.Attempts, j.RestartsUsed(), j.Evictions, j.State, j.Reason)
		}
		for _, a := range allocs {
			if a.Attempt == 1 && a.State != structs.AllocKilled {
				return fmt.Errorf("the first attempt's allocation is %s, want killed", a.State)
			}
		}
		return runningAlloc(j, allocs)
	})

	if _, err := c.CancelJob(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	waitJob(t, tc.agents[0], job.ID, func(j *structs.Job, _ []*structs.Allocation) error {
		if j.State != structs.JobCancelled {
			return fmt.Errorf("job %s is %s", j.SlurmID(), j.State)
		}
		return nil
	})
	_, err = c.RequeueJob(ctx, job.SlurmID())
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusConflict || !strings.Contains(err.Error(), "only a running or pending job is requeued") {
		t.Errorf("requeue of a cancelled job: %v, want 409 saying why", err)
	}
}
