package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func intp(v int) *int { return &v }

func TestAgent_SubmitOverALimitIsRefusedWithTheLimitNamed(t *testing.T) {
	t.Parallel()
	a, c := startAgent(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	if _, err := c.SetLimits(ctx, structs.LimitsSetRequest{Default: true, Limits: structs.Limits{MaxQueued: intp(2), MaxArray: intp(5)}}); err != nil {
		t.Fatal(err)
	}
	before := a.fsm.Index()
	cases := []struct {
		name  string
		array structs.ArraySpec
		want  string
	}{
		{"array over the array limit", structs.ArraySpec{Start: 0, End: 5}, `limit: admin may submit arrays of at most 5 tasks (this one has 6)`},
		{"array over the queued limit", structs.ArraySpec{Start: 0, End: 2}, `limit: admin may have 2 queued jobs (has 0, this array adds 3)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, Array: &tc.array}})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusForbidden || !strings.Contains(ae.Message, tc.want) {
				t.Fatalf("submit: %v, want 403 with %q", err, tc.want)
			}
		})
	}
	if a.fsm.Index() != before {
		t.Fatal("a submit over a limit wrote a log entry")
	}
	if jobs, err := c.Jobs(ctx, true); err != nil || len(jobs) != 0 {
		t.Fatalf("jobs after refused submits: %d, %v; want none", len(jobs), err)
	}
	info, err := c.Limits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Default.MaxQueued != 2 || info.Default.MaxArray != 5 || info.Default.MaxGPUs != structs.Unlimited ||
		info.Cluster.MaxQueued != structs.DefaultClusterMaxQueued {
		t.Fatalf("limits %+v", info)
	}
}

func TestAgent_OwnerGPULimitKeepsAJobQueuedUntilGPUsAreFree(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	if _, err := c.SetLimits(ctx, structs.LimitsSetRequest{Default: true, Limits: structs.Limits{MaxGPUs: intp(2)}}); err != nil {
		t.Fatal(err)
	}
	first := submit(t, c, 2, "sleep", "60")
	waitJobState(t, c, first.ID, structs.JobRunning)
	second := submit(t, c, 1, "true")
	want := "waiting: admin's GPU limit (2) is in use"
	testutil.WaitFor(t, 10*time.Second, func() error {
		d, err := c.Job(ctx, second.ID)
		if err != nil {
			return err
		}
		if d.Job.State != structs.JobQueued || d.Job.Reason != want {
			return fmt.Errorf("second job is %s with reason %q, want queued with %q", d.Job.State, d.Job.Reason, want)
		}
		return nil
	})
	u, err := c.UserLimits(ctx, "alice")
	if err != nil || u.Limits.MaxGPUs != 2 || u.GPUs != 0 {
		t.Fatalf("alice's limits %+v, %v; want the default of 2 GPUs and none held", u, err)
	}
	if _, err := c.CancelJob(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, second.ID, structs.JobSucceeded)
}

func TestAgent_JobsArePagedAndEachListedOnce(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	// A job that never runs (the GPUs are all held) keeps the tasks queued.
	hold := submit(t, c, 4, "sleep", "60")
	waitJobState(t, c, hold.ID, structs.JobRunning)
	want := map[string]bool{hold.ID: true}
	add := func(tasks int) {
		t.Helper()
		j, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, GPUs: 1,
			Array: &structs.ArraySpec{Start: 0, End: tasks - 1}}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range tasks {
			want[structs.ArrayTaskID(j.ArrayID, i)] = true
		}
	}
	add(12)
	seen := map[string]int{}
	q := api.JobsQuery{Limit: 5}
	for pages := 0; ; pages++ {
		p, err := c.JobsPage(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Jobs) > q.Limit {
			t.Fatalf("page of %d jobs, limit %d", len(p.Jobs), q.Limit)
		}
		for _, j := range p.Jobs {
			seen[j.ID]++
		}
		if pages == 0 {
			add(3) // submitted while the client pages
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("job %s listed %d times, want once", structs.ShortID(id), seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d jobs, want %d", len(seen), len(want))
	}
	for _, bad := range []api.JobsQuery{{Limit: api.MaxJobsPage + 1}, {Limit: -1}, {After: "nonsense"}} {
		_, err := c.JobsPage(ctx, bad)
		var ae *api.Error
		field := "limit: "
		if bad.After != "" {
			field = "after: "
		}
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadRequest || !strings.HasPrefix(ae.Message, field) {
			t.Errorf("page %+v: %v, want 400 naming %s", bad, err, field)
		}
	}
}

func TestCluster_LimitsSetThroughAFollowerHoldOnEveryNode(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, 3)
	ctx := context.Background()
	follower := tc.agents[(tc.leader()+1)%3]
	if _, err := tc.client(follower).SetLimits(ctx, structs.LimitsSetRequest{Cluster: true, Limits: structs.Limits{MaxQueued: intp(2)}}); err != nil {
		t.Fatalf("set through a follower: %v", err)
	}
	for _, a := range tc.agents {
		testutil.WaitFor(t, 5*time.Second, func() error {
			info, err := tc.client(a).Limits(ctx)
			if err != nil {
				return err
			}
			if info.Cluster.MaxQueued != 2 {
				return fmt.Errorf("%s: cluster limit %d, want 2", a.cfg.Name, info.Cluster.MaxQueued)
			}
			return nil
		})
	}
	// Every node refuses what passes it, forwarding or not.
	for _, a := range tc.agents {
		_, err := tc.client(a).SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"},
			Array: &structs.ArraySpec{Start: 0, End: 2}}})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusForbidden || !strings.Contains(ae.Message, "the cluster may have 2 queued jobs") {
			t.Fatalf("%s: submit of 3 tasks: %v, want 403 naming the cluster's limit", a.cfg.Name, err)
		}
	}
}
