package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// TestAgent_FinishedJobsGoAfterTheirRetentionWithTheirDirectories: a
// finished job, its allocation and its directory (logs included) stay for
// the retention and then go; a finished job that a job still going
// depends on stays until that one has ended too.
func TestAgent_FinishedJobsGoAfterTheirRetentionWithTheirDirectories(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.JobRetention = 2 * time.Second
	a, c := startAgent(t, cfg)
	ctx := context.Background()

	done := submit(t, c, 1, "echo", "kept a while")
	first := submit(t, c, 0, "true")
	release := filepath.Join(testutil.JobDir(t), "release")
	second := submitSpec(t, c, structs.JobSpec{Command: waitingFor(release),
		After: []structs.Dependency{{JobID: first.ID, Condition: structs.AfterAny}}})
	d := waitJobState(t, c, done.ID, structs.JobSucceeded)
	waitJobState(t, c, second.ID, structs.JobRunning)
	dir := filepath.Join(a.allocDir(), d.Allocations[0].ID)
	if got := logs(t, c, done.ID, api.StreamStdout); got != "kept a while\n" {
		t.Fatalf("logs of a finished job within its retention: %q", got)
	}

	gone := func(id string) error {
		if _, err := c.Job(ctx, id); !api.IsNotFound(err) {
			return fmt.Errorf("job %s is still there (%v)", structs.ShortID(id), err)
		}
		return nil
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		if err := gone(done.ID); err != nil {
			return err
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			return fmt.Errorf("allocation directory %s is still there (%v)", dir, err)
		}
		return nil
	})
	// The finished job the running one depends on outlives its retention.
	if _, err := c.Job(ctx, first.ID); err != nil {
		t.Fatalf("a finished job a running job depends on was removed: %v", err)
	}
	if err := writeFile(release); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, func() error {
		if err := gone(second.ID); err != nil {
			return err
		}
		return gone(first.ID)
	})
}
