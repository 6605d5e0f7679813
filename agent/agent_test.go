package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestAgent_JobRunsToSuccessWithItsGPUsAndLogs(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	job := submit(t, c, 2, "sh", "-c", `echo "gpus=$CUDA_VISIBLE_DEVICES order=$CUDA_DEVICE_ORDER job=$SKEIN_JOB_ID"; echo oops >&2`)
	d := waitJobState(t, c, job.ID, structs.JobSucceeded)

	if len(d.Allocations) != 1 {
		t.Fatalf("got %d allocations, want 1", len(d.Allocations))
	}
	alloc := d.Allocations[0]
	if alloc.State != structs.AllocSucceeded || alloc.ExitCode != 0 || len(alloc.GPUs) != 2 {
		t.Fatalf("allocation = %+v, want succeeded with exit 0 on 2 GPUs", alloc)
	}
	want := fmt.Sprintf("gpus=%s order=PCI_BUS_ID job=%s\n", strings.Join(alloc.GPUs, ","), job.ID)
	if got := logs(t, c, job.ID, api.StreamStdout); got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got := logs(t, c, job.ID, api.StreamStderr); got != "oops\n" {
		t.Errorf("stderr = %q, want %q", got, "oops\n")
	}
}

func TestAgent_NonZeroExitFailsTheJobWithItsCode(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	job := submit(t, c, 0, "sh", "-c", "exit 3")
	d := waitJobState(t, c, job.ID, structs.JobFailed)
	if d.Job.ExitCode != 3 || !strings.Contains(d.Job.Reason, "3") {
		t.Fatalf("job exit code %d reason %q, want 3", d.Job.ExitCode, d.Job.Reason)
	}
}

func TestAgent_CancelStopsARunningJob(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	job := submit(t, c, 1, "sleep", "60")
	waitJobState(t, c, job.ID, structs.JobRunning)
	testutil.WaitFor(t, 10*time.Second, func() error {
		d, err := c.Job(context.Background(), job.ID)
		if err != nil {
			return err
		}
		if d.Allocations[0].State != structs.AllocRunning {
			return fmt.Errorf("allocation is %s", d.Allocations[0].State)
		}
		return nil
	})
	if _, err := c.CancelJob(context.Background(), structs.ShortID(job.ID)); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	d := waitJobState(t, c, job.ID, structs.JobCancelled)
	if st := d.Allocations[0].State; st != structs.AllocKilled {
		t.Fatalf("allocation state %s after cancel, want killed", st)
	}
	if _, err := c.CancelJob(context.Background(), job.ID); err == nil {
		t.Fatal("cancelling a cancelled job succeeded, want an error")
	}
}

func TestAgent_JobThatCannotFitNowWaitsAndSaysWhy(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	first := submit(t, c, 3, "sleep", "60")
	waitJobState(t, c, first.ID, structs.JobRunning)
	second := submit(t, c, 2, "true")
	var d *api.JobDetail
	testutil.WaitFor(t, 10*time.Second, func() error {
		var err error
		d, err = c.Job(context.Background(), second.ID)
		if err != nil {
			return err
		}
		if d.Job.State != structs.JobQueued || !strings.Contains(d.Job.Reason, "not enough free GPUs") {
			return fmt.Errorf("second job is %s with reason %q", d.Job.State, d.Job.Reason)
		}
		return nil
	})
	// Freeing the GPUs lets it run.
	if _, err := c.CancelJob(context.Background(), first.ID); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, second.ID, structs.JobSucceeded)
}

func TestAgent_SubmitIsIdempotentByRequestID(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	req := api.SubmitRequest{RequestID: "retry-me", Spec: structs.JobSpec{Command: []string{"true"}}}
	a, err := c.SubmitJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.SubmitJob(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID {
		t.Fatalf("same request ID gave two jobs: %s and %s", a.ID, b.ID)
	}
	jobs, err := c.Jobs(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d jobs after a repeated submit, want 1", len(jobs))
	}
}

func TestAgent_BadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	a, admin, c := startAgentAdmin(t, testConfig(t, t.TempDir()))
	before := a.fsm.Index()
	post := func(body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, a.HTTPAddr()+"/v1/jobs", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.TokenHeader, admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var eb api.ErrorBody
		if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
			t.Fatalf("error body is not JSON: %v", err)
		}
		return resp.StatusCode, eb.Error
	}
	cases := []struct {
		name, body string
		code       int
		msg        string
	}{
		{"more GPUs than any node", `{"spec":{"command":["x"],"gpus":12}}`, 400, "no node has 12 GPUs; largest has 4"},
		{"empty command", `{"spec":{"command":[]}}`, 400, "command: empty"},
		{"negative memory", `{"spec":{"command":["x"],"memory_mib":-1}}`, 400, "memory_mib"},
		{"bad duration", `{"spec":{"command":["x"],"time_limit":"soon"}}`, 400, "invalid duration"},
		{"negative duration", `{"spec":{"command":["x"],"time_limit":"-1h"}}`, 400, "must not be negative"},
		{"unknown field", `{"spec":{"command":["x"]},"priority":3}`, 400, `unknown field "priority"`},
		{"not json", `{"spec":`, 400, "bad request"},
		{"trailing data", `{"spec":{"command":["x"]}} {}`, 400, "after the JSON body"},
		{"body over 1 MiB", `{"spec":{"command":["` + strings.Repeat("a", api.MaxBodyBytes) + `"]}}`, 413, "larger than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := post(tc.body)
			if code != tc.code || !strings.Contains(body, tc.msg) {
				t.Fatalf("POST %s: %d %s; want %d containing %q", tc.name, code, body, tc.code, tc.msg)
			}
		})
	}
	_, err := c.Job(context.Background(), "ffffffff")
	if !api.IsNotFound(err) {
		t.Errorf("unknown job: %v, want a 404", err)
	}
	if _, err := c.CancelJob(context.Background(), "ffffffff"); !api.IsNotFound(err) {
		t.Errorf("cancel unknown job: %v, want a 404", err)
	}
	if after := a.fsm.Index(); after != before {
		t.Errorf("bad input moved the raft index from %d to %d", before, after)
	}
}

func TestAgent_TokenIsRequiredWhenSet(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.Token = "s3cret"
	a, c := startAgentWithoutACL(t, cfg) // the cluster's API token works only until the bootstrap
	if _, err := c.Status(context.Background()); err != nil {
		t.Fatalf("status with the token: %v", err)
	}
	anon, _ := api.NewClient(a.HTTPAddr(), "")
	var apiErr *api.Error
	if _, err := anon.Status(context.Background()); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status without the token: %v, want 401", err)
	}
}

func TestAgent_InsecureClusterRefusesPublicAPIWithoutToken(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.BindAddr = "0.0.0.0"
	cfg.Security = SecurityInsecure
	if _, err := New(cfg); !errors.Is(err, ErrNoToken) {
		t.Fatalf("New with a public bind, --insecure-cluster and no token = %v, want ErrNoToken", err)
	}
}

func TestConfig_SecureUnlessDevOrLoopback(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		want Security
	}{
		{"public bind", Config{DataDir: "x", BindAddr: "0.0.0.0", AdvertiseAddr: "10.0.0.1"}, SecurityTLS},
		{"public address", Config{DataDir: "x", BindAddr: "10.0.0.1"}, SecurityTLS},
		{"loopback", Config{DataDir: "x", BindAddr: "127.0.0.11"}, SecurityAuto},
		{"dev", Config{Dev: true}, SecurityAuto},
		{"--tls on loopback", Config{DataDir: "x", BindAddr: "127.0.0.1", Security: SecurityTLS}, SecurityTLS},
		{"--insecure-cluster", Config{DataDir: "x", BindAddr: "10.0.0.1", Security: SecurityInsecure, Token: "t"}, SecurityInsecure},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if got.Security != tc.want {
				t.Errorf("security %q, want %q", got.Security, tc.want)
			}
		})
	}
	if _, err := (Config{BindAddr: "10.0.0.1", BootstrapExpect: 3}).withDefaults(); err == nil || !strings.Contains(err.Error(), "join token") {
		t.Errorf("--bootstrap-expect on a secure cluster: %v, want refused with a pointer to join tokens", err)
	}
}

func TestAgent_StatusAndNodesDescribeTheNode(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	job := submit(t, c, 1, "sleep", "60")
	waitJobState(t, c, job.ID, structs.JobRunning)
	s, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Leader != "test-node" || s.Nodes != 1 || s.GPUsTotal != 4 || s.GPUsFree != 3 || !s.GPUsSimulated || s.Jobs[structs.JobRunning] != 1 {
		t.Fatalf("status = %+v", s)
	}
	nodes, err := c.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 {
		t.Fatalf("%d nodes, want 1", len(nodes))
	}
	n := nodes[0]
	if n.Role != structs.RoleLeader || n.GPUsFree != 3 || n.GPUsTotal != 4 || n.GPUSource != "simulated" || len(n.GPUJobs) != 1 {
		t.Fatalf("node = %+v", n)
	}
}

// TestAgent_RestartKeepsHistoryAndAdoptsRunningJobs stops the agent while a
// job runs, starts a new one on the same data dir, and checks that history
// is intact and the running job's real exit code still arrives.
func TestAgent_RestartKeepsHistoryAndAdoptsRunningJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	first, admin, c := startAgentAdmin(t, cfg)
	done := submit(t, c, 1, "true")
	waitJobState(t, c, done.ID, structs.JobSucceeded)
	marker := testutil.JobDir(t) + "/release"
	running := submit(t, c, 2, "sh", "-c", fmt.Sprintf(`while [ ! -e %s ]; do sleep 0.05; done; exit 7`, marker))
	waitJobState(t, c, running.ID, structs.JobRunning)
	testutil.WaitFor(t, 10*time.Second, func() error {
		d, err := c.Job(context.Background(), running.ID)
		if err != nil {
			return err
		}
		if d.Allocations[0].State != structs.AllocRunning {
			return fmt.Errorf("allocation is %s", d.Allocations[0].State)
		}
		return nil
	})
	first.Shutdown()

	_, c = restartAgent(t, cfg, admin)
	d := waitJobState(t, c, done.ID, structs.JobSucceeded)
	if len(d.Allocations) != 1 {
		t.Fatalf("finished job has %d allocations after restart, want 1", len(d.Allocations))
	}
	if err := writeFile(marker); err != nil {
		t.Fatal(err)
	}
	d = waitJobState(t, c, running.ID, structs.JobFailed)
	if d.Job.ExitCode != 7 {
		t.Fatalf("adopted job ended with exit code %d (%s), want 7", d.Job.ExitCode, d.Job.Reason)
	}
}

func TestAgent_FailingJobIsRestartedThenFails(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	counter := testutil.SharedDir(t) + "/runs"
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Command:  []string{"sh", "-c", fmt.Sprintf("echo run >> %s; exit 4", counter)},
		Restarts: 2,
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := waitJobState(t, c, job.ID, structs.JobFailed)
	if d.Job.Attempts != 3 || len(d.Allocations) != 3 || d.Job.ExitCode != 4 {
		t.Fatalf("job after restarts: attempts %d, %d allocations, exit %d; want 3, 3, 4", d.Job.Attempts, len(d.Allocations), d.Job.ExitCode)
	}
	runs, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(runs), "run"); n != 3 {
		t.Fatalf("the job ran %d times, want 3", n)
	}
}

func TestAgent_TimeLimitEndsTheJobTimedOutWithoutRestart(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	job, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Command:   []string{"sleep", "60"},
		TimeLimit: structs.Duration(300 * time.Millisecond),
		Restarts:  2,
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := waitJobState(t, c, job.ID, structs.JobTimedOut)
	if !strings.Contains(d.Job.Reason, "time limit") || d.Job.Attempts != 1 {
		t.Fatalf("job %+v, want one attempt and a reason naming the time limit", d.Job)
	}
	if len(d.Allocations) != 1 || d.Allocations[0].State != structs.AllocTimedOut {
		t.Fatalf("allocations %+v, want one timed out", d.Allocations)
	}
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Jobs[structs.JobTimedOut] != 1 {
		t.Fatalf("status counts %v, want one timed_out", st.Jobs)
	}
}

func TestAgent_DependenciesOrderJobs(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	dir := testutil.SharedDir(t)
	submitAfter := func(argv []string, after ...structs.Dependency) *structs.Job {
		t.Helper()
		job, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{Command: argv, After: after}})
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	marker := dir + "/first-done"
	first := submitAfter([]string{"sh", "-c", fmt.Sprintf("sleep 0.3; touch %s", marker)})
	bad := submitAfter([]string{"false"})
	// A prefix of the ID works, as on the command line.
	second := submitAfter([]string{"test", "-e", marker}, structs.Dependency{JobID: structs.ShortID(first.ID), Condition: structs.AfterOK})
	never := submitAfter([]string{"true"}, structs.Dependency{JobID: bad.ID, Condition: structs.AfterOK})
	anyway := submitAfter([]string{"true"}, structs.Dependency{JobID: bad.ID, Condition: structs.AfterAny})

	// second only starts once first has succeeded, so its test finds the file.
	waitJobState(t, c, second.ID, structs.JobSucceeded)
	d := waitJobState(t, c, never.ID, structs.JobCancelled)
	if !strings.Contains(d.Job.Reason, "dependency "+structs.ShortID(bad.ID)+" failed") {
		t.Errorf("never-satisfied job's reason %q", d.Job.Reason)
	}
	waitJobState(t, c, anyway.ID, structs.JobSucceeded)

	_, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Command: []string{"true"}, After: []structs.Dependency{{JobID: "ffffffff", Condition: structs.AfterOK}}}})
	if err == nil || !strings.Contains(err.Error(), "after") {
		t.Fatalf("dependency on an unknown job: %v, want an error naming after", err)
	}
}

func TestAgent_JobArrayRunsEveryIndexWithinItsCap(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	first, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		GPUs:    1, // 4 GPUs would let all four run at once but for the cap
		Command: []string{"sh", "-c", "echo $SKEIN_ARRAY_INDEX $SLURM_ARRAY_TASK_ID; sleep 0.3"},
		Array:   &structs.ArraySpec{Start: 0, End: 3, MaxRunning: 2},
	}})
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end time.Time }
	var spans []span
	for i := range 4 {
		id := structs.ArrayTaskID(first.ArrayID, i)
		d := waitJobState(t, c, id, structs.JobSucceeded)
		if got, want := logs(t, c, id, api.StreamStdout), fmt.Sprintf("%d %d\n", i, i); got != want {
			t.Errorf("task %d printed %q, want %q", i, got, want)
		}
		spans = append(spans, span{d.Allocations[0].StartedAt, d.Allocations[0].FinishedAt})
	}
	// The most tasks running at once is reached at some task's start.
	for _, s := range spans {
		running := 0
		for _, o := range spans {
			if !o.start.After(s.start) && s.start.Before(o.end) {
				running++
			}
		}
		if running > 2 {
			t.Fatalf("%d tasks ran at once, the cap is 2: %v", running, spans)
		}
	}
}

func TestAgent_CancellingAnArrayCancelsEveryTask(t *testing.T) {
	t.Parallel()
	_, c := startAgent(t, testConfig(t, t.TempDir()))
	first, err := c.SubmitJob(context.Background(), api.SubmitRequest{Spec: structs.JobSpec{
		Command: []string{"sleep", "60"}, Array: &structs.ArraySpec{Start: 0, End: 2, MaxRunning: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, first.ID, structs.JobRunning)
	// The answer names every task the cancel reached (the issue: it
	// named only the last).
	tasks, err := c.Cancel(context.Background(), structs.ShortID(first.ArrayID))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 {
		t.Fatalf("the cancel answered %d tasks, want 3", len(tasks))
	}
	for i, j := range tasks {
		if j.ID != structs.ArrayTaskID(first.ArrayID, i) {
			t.Fatalf("task %d of the answer is %s", i, j.ID)
		}
	}
	for i := range 3 {
		waitJobState(t, c, structs.ArrayTaskID(first.ArrayID, i), structs.JobCancelled)
	}
}
