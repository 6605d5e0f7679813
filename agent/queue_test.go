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

// With room for one of them, a high-priority job submitted after a low one
// runs first; while it waits it is first in line and says so.
func TestAgent_HigherPriorityJobSubmittedLaterRunsFirst(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	blocker := submit(t, c, 4, "sleep", "60")
	waitJobState(t, c, blocker.ID, structs.JobRunning)
	submitPrio := func(prio int) *structs.Job {
		t.Helper()
		job, err := c.SubmitJob(context.Background(), api.SubmitRequest{
			RequestID: structs.NewID(),
			Spec:      structs.JobSpec{Command: []string{"true"}, GPUs: 4, Priority: prio},
		})
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	low := submitPrio(0)
	high := submitPrio(5)
	testutil.WaitFor(t, 10*time.Second, func() error {
		d, err := c.Job(context.Background(), high.ID)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(d.Job.Reason, "first in line: 4 GPUs on 1 node reserved") {
			return fmt.Errorf("high-priority job's reason %q", d.Job.Reason)
		}
		return nil
	})

	if _, err := c.CancelJob(context.Background(), blocker.ID); err != nil {
		t.Fatal(err)
	}
	h := waitJobState(t, c, high.ID, structs.JobSucceeded)
	l := waitJobState(t, c, low.ID, structs.JobSucceeded)
	if hi, lo := h.Allocations[0].CreateIndex, l.Allocations[0].CreateIndex; hi >= lo {
		t.Fatalf("high-priority job placed at index %d, low at %d: want high first", hi, lo)
	}
}
