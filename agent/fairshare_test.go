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

// TestAgent_FairShare_TheOtherAccountsJobRunsNextWhileOneFloods is fair
// share end to end on a real agent (Raft, HTTP, real processes on
// simulated GPUs): alice, in account alpha, floods the queue; bob, in
// beta with as many shares, submits one job after hers. Her running job
// is charged to alpha, so when it ends bob's job runs next, ahead of all
// her older ones. The accounts are named so that without usage alice
// would win the tie: only the charged usage puts bob first.
func TestAgent_FairShare_TheOtherAccountsJobRunsNextWhileOneFloods(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.UsageInterval = 100 * time.Millisecond
	a, admin := startAgent(t, cfg)
	ctx := context.Background()
	for _, req := range []structs.AccountRequest{
		{Op: structs.AccountCreate, Name: "alpha", Shares: intp(50)},
		{Op: structs.AccountCreate, Name: "beta", Shares: intp(50)},
		{Op: structs.AccountAddUser, Name: "alpha", User: "alice"},
		{Op: structs.AccountAddUser, Name: "beta", User: "bob"},
	} {
		if _, err := admin.SetAccount(ctx, req); err != nil {
			t.Fatalf("%s %s: %v", req.Op, req.Name, err)
		}
	}
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	bob := clientFor(t, a, userToken(t, admin, "bob", structs.RoleSubmitter))
	sub := func(c *api.Client, argv ...string) *structs.Job {
		t.Helper()
		j, err := c.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: argv, Nodes: 1, GPUs: 4}})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	first := sub(alice, "sleep", "2")
	waitJobState(t, alice, first.ID, structs.JobRunning)
	var flood []*structs.Job
	for range 5 {
		flood = append(flood, sub(alice, "sleep", "30"))
	}
	// Only an admin changes the accounts, QoS and weights.
	for _, err := range []error{
		func() error {
			_, err := alice.SetAccount(ctx, structs.AccountRequest{Op: structs.AccountUpdate, Name: "alpha", Shares: intp(1000)})
			return err
		}(),
		func() error {
			_, err := alice.SetAccount(ctx, structs.AccountRequest{Op: structs.AccountAddUser, Name: "beta", User: "alice"})
			return err
		}(),
		func() error {
			_, err := alice.SetQoS(ctx, structs.QoSRequest{Op: structs.QoSSet, QoS: structs.QoS{Name: "mine", Priority: 1000}})
			return err
		}(),
	} {
		var ae *api.Error
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusForbidden {
			t.Fatalf("a submitter changing fair share: %v, want 403", err)
		}
	}
	// bob may not charge alpha.
	if _, err := bob.SubmitJob(ctx, api.SubmitRequest{Spec: structs.JobSpec{Command: []string{"true"}, GPUs: 1, Account: "alpha"}}); err == nil ||
		!strings.Contains(err.Error(), "bob is not a member of account alpha") {
		t.Fatalf("bob submitting to alpha: %v", err)
	}
	// Usage is charged while alice's first job runs.
	testutil.WaitFor(t, 10*time.Second, func() error {
		info, err := admin.Share(ctx)
		if err != nil {
			return err
		}
		for _, r := range info.Rows {
			if r.User == "alice" && r.Usage.GPUSeconds > 0 {
				return nil
			}
		}
		return fmt.Errorf("no usage charged to alice yet: %+v", info.Rows)
	})
	theirs := sub(bob, "sleep", "30")
	if theirs.Spec.Account != "beta" {
		t.Fatalf("bob's job is charged to %q, want his default beta", theirs.Spec.Account)
	}
	// While it waits, alice's jobs say what puts bob's first.
	testutil.WaitFor(t, 10*time.Second, func() error {
		d, err := alice.Job(ctx, flood[0].ID)
		if err != nil {
			return err
		}
		if d.Queue == nil || d.Queue.Ahead == nil || d.Queue.Ahead.JobID != theirs.ID ||
			!strings.Contains(d.Queue.Behind, "most of it fair share 1.00 against 0.50") {
			return fmt.Errorf("alice's first queued job: %+v", d.Queue)
		}
		return nil
	})
	d := waitJobState(t, bob, theirs.ID, structs.JobRunning)
	for _, j := range flood {
		dj, err := alice.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if dj.Job.State != structs.JobQueued {
			t.Fatalf("alice's job %s is %s while bob's started at %s: bob's should have run next", j.ID, dj.Job.State, d.Job.StartedAt)
		}
	}
	prio, err := admin.Prio(ctx, "", 0)
	if err != nil || prio.Weights == nil || prio.Total != len(flood) || prio.Jobs[0].Owner != "alice" {
		t.Fatalf("prio %+v, %v", prio, err)
	}
}

// usageOf is the GPU-seconds a's state holds for user in account, and
// when usage was last charged.
func usageOf(a *Agent, account, user string) (float64, time.Time) {
	fs := a.fsm.FairShare()
	for _, r := range fs.Usage {
		if r.Account == account && r.User == user {
			return r.GPUSeconds, fs.At
		}
	}
	return 0, fs.At
}

// TestCluster_FairShare_UsageIsKeptAcrossALeaderChange kills the leader
// of three agents while a job is charged: the new leader goes on from
// the last committed charge, so the usage neither starts again nor is
// counted twice, and every replica holds the same numbers.
func TestCluster_FairShare_UsageIsKeptAcrossALeaderChange(t *testing.T) {
	t.Parallel()
	tc := startClusterWith(t, 3, func(i int, cfg *Config) {
		cfg.UsageInterval = 100 * time.Millisecond
		cfg.Labels = map[string]string{"node": fmt.Sprint(i)}
	})
	ctx := context.Background()
	lead := tc.agents[tc.leader()]
	admin := tc.client(lead)
	for _, req := range []structs.AccountRequest{
		{Op: structs.AccountCreate, Name: "ml", Shares: intp(1)},
		{Op: structs.AccountAddUser, Name: "ml", User: "admin"},
	} {
		if _, err := admin.SetAccount(ctx, req); err != nil {
			t.Fatalf("%s: %v", req.Op, err)
		}
	}
	// Two GPUs on a node that is not the leader's, so the job runs on.
	otherIdx := (tc.leader() + 1) % 3
	other := tc.agents[otherIdx]
	job := tc.submit(lead, structs.JobSpec{Command: []string{"sleep", "60"}, Nodes: 1, GPUs: 2,
		Constraints: map[string]string{"node": fmt.Sprint(otherIdx)}})
	if job.Spec.Account != "ml" {
		t.Fatalf("job charged to %q, want admin's default ml", job.Spec.Account)
	}
	started := time.Now()
	var before float64
	var chargedAt time.Time
	testutil.WaitFor(t, 15*time.Second, func() error {
		if before, chargedAt = usageOf(other, "ml", "admin"); before < 1 {
			return fmt.Errorf("%.2f GPU-seconds charged so far", before)
		}
		return nil
	})
	tc.kill(tc.leader())
	next := tc.agents[tc.leader()]
	testutil.WaitFor(t, 15*time.Second, func() error {
		after, at := usageOf(next, "ml", "admin")
		switch {
		case !at.After(chargedAt.Add(time.Second)):
			return fmt.Errorf("the new leader has not charged yet (last charge %s)", at)
		case after < before:
			return fmt.Errorf("usage fell from %.2f to %.2f GPU-seconds across the leader change", before, after)
		case after > 2*time.Since(started).Seconds()+0.5:
			return fmt.Errorf("%.2f GPU-seconds for 2 GPUs over %s: counted twice", after, time.Since(started))
		}
		return nil
	})
	tc.checkInvariants()
}

// TestAgent_FairShare_UsageIsKeptAcrossARestart: what was charged is in
// the state on disk, and a restarted agent goes on from it.
func TestAgent_FairShare_UsageIsKeptAcrossARestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.UsageInterval = 100 * time.Millisecond
	first, token, c := startAgentAdmin(t, cfg)
	ctx := context.Background()
	if _, err := c.SetAccount(ctx, structs.AccountRequest{Op: structs.AccountCreate, Name: "ml", Shares: intp(1)}); err != nil {
		t.Fatal(err)
	}
	job := submit(t, c, 1, "sleep", "60")
	waitJobState(t, c, job.ID, structs.JobRunning)
	var before float64
	testutil.WaitFor(t, 10*time.Second, func() error {
		if before, _ = usageOf(first, "", "admin"); before < 0.5 {
			return fmt.Errorf("%.2f GPU-seconds charged so far", before)
		}
		return nil
	})
	first.Shutdown()
	second, _ := restartAgent(t, cfg, token)
	if after, _ := usageOf(second, "", "admin"); after < before {
		t.Fatalf("usage %.2f GPU-seconds after the restart, %.2f before", after, before)
	}
}
