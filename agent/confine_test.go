package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/agent/cgroup"
	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// confinedConfig is a test agent's configuration where the machine lets
// tests confine jobs; it skips the test elsewhere.
func confinedConfig(t *testing.T) Config {
	t.Helper()
	h, why := testutil.Cgroups()
	if h == nil {
		t.Skipf("jobs run unconfined here: %s", why)
	}
	cfg := testConfig(t, t.TempDir())
	cfg.AllowUnconfined = false
	return cfg
}

// TestAgent_AJobOverItsMemoryEndsOutOfMemory: through the API, a job that
// grows past --mem fails "out of memory", with what it used recorded on
// its allocation and the job, and an event that says so; the node says
// how it confines jobs.
func TestAgent_AJobOverItsMemoryEndsOutOfMemory(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, confinedConfig(t))
	ctx := context.Background()
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 1 || !strings.HasPrefix(nodes[0].Confinement, "cgroup v") || nodes[0].JobsRefused != "" ||
		nodes[0].JobPidsMax < structs.MinPidsMax {
		t.Fatalf("nodes %+v (%v): want one that confines jobs in cgroups", nodes, err)
	}
	job := submitSpec(t, c, structs.JobSpec{Command: []string{"tail", "/dev/zero"}, MemoryMiB: 32})
	d := waitJobState(t, c, job.ID, structs.JobFailed)
	const reason = "out of memory: used 32M of its 32M limit"
	a := d.Allocations[0]
	if d.Job.Reason != reason || d.Job.ExitCode != 137 || a.Reason != reason {
		t.Errorf("job %q (exit %d), allocation %q; want %q, exit 137", d.Job.Reason, d.Job.ExitCode, a.Reason, reason)
	}
	if a.Usage == nil || a.Usage.OOMKills < 1 || a.Usage.MemoryLimitBytes != 32<<20 || d.Job.Usage == nil || d.Job.Usage.OOMKills < 1 {
		t.Errorf("allocation usage %+v, job usage %+v: want the OOM kill and the 32M limit on both", a.Usage, d.Job.Usage)
	}
	page, err := c.Events(ctx, api.EventsQuery{Job: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	var failed bool
	for _, e := range page.Events {
		failed = failed || e.Kind == structs.EventJobFailed && strings.Contains(e.Reason, reason)
	}
	if !failed {
		t.Errorf("events %+v: none says the job failed out of memory", page.Events)
	}
}

// TestAgent_AForkBombLeavesTheNodeAnswering: a fork bomb stops at the
// node's process limit for a job, the agent keeps answering while it
// runs, the bomb goes with its cancel, and the next job runs; a job
// asking for more processes than the node lets one hold is refused at
// submit, naming the field.
func TestAgent_AForkBombLeavesTheNodeAnswering(t *testing.T) {
	cfg := confinedConfig(t)
	cfg.JobPidsMax = 128
	a, c := startAgent(t, cfg)
	ctx := context.Background()
	// The bomb goes off in a subshell, and the job's own shell becomes
	// sleep without a fork: a fork of its own, made after the bomb, could
	// find the limit reached and end the job before the test looks.
	bomb := submit(t, c, 0, "sh", "-c", `(b() { b | b & }; b); exec sleep 1000`)
	d := waitJobState(t, c, bomb.ID, structs.JobRunning)
	h, err := cgroup.Detect("/proc/self/mountinfo", filepath.Join(cfg.CgroupParent, a.Name()))
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Group(d.Allocations[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := c.Status(ctx); err != nil {
			t.Fatalf("the agent stopped answering under a fork bomb: %v", err)
		}
		if pids, err := g.Procs(); err != nil || len(pids) > 128 {
			t.Fatalf("the bomb's group holds %d processes (%v), above the node's limit of 128", len(pids), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.CancelJob(ctx, bomb.ID); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, bomb.ID, structs.JobCancelled)
	next := submit(t, c, 0, "true")
	waitJobState(t, c, next.ID, structs.JobSucceeded)

	_, err = c.SubmitJob(ctx, api.SubmitRequest{RequestID: structs.NewID(),
		Spec: structs.JobSpec{Command: []string{"true"}, PidsMax: 1000}})
	var e *api.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(err.Error(), "pids_max") {
		t.Errorf("a job asking for 1000 processes of a node that lets 128: %v, want 400 naming pids_max", err)
	}
}
