package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// An update whose new replicas ask for every GPU of the only node while a
// batch job holds one of them can never be placed: the rollout makes no
// progress, and at its spec's progress deadline it rolls back, naming the
// replica that was not placed and the scheduler's reason; the old
// replicas serve throughout and the unplaced one is stopped.
func TestRollout_AVersionThatCannotBePlacedRollsBackAtItsProgressDeadline(t *testing.T) {
	t.Parallel()
	a, token, c, spec := workloadService(t, 2)
	old := wantedReplicas(a)
	batch := submit(t, c, 1, "sleep", "600")
	waitJobState(t, c, batch.ID, structs.JobRunning)
	l := startLoad(t, a, token, 2, 20)

	big := spec
	big.Job.GPUs = 4
	big.ProgressDeadline = structs.Duration(3 * time.Second)
	if _, err := c.UpdateService(context.Background(), "web", api.ServiceUpdateRequest{Spec: big}); err != nil {
		t.Fatalf("update: %v", err)
	}
	svc := waitRollout(t, a, structs.RolloutRolledBack)
	l.check(t, 10)

	r := svc.Rollout
	const prefix = "rolled back: version 2 made no progress in 3s: replica r2 not placed: "
	if svc.Version != 1 || r.From != 2 || !strings.HasPrefix(r.Reason, prefix) || !strings.Contains(r.Reason, "GPU") {
		t.Fatalf("after the rollback: version %d, rollout %+v; want the reason to start %q and name the GPUs", svc.Version, r, prefix)
	}
	t.Logf("%s", r.Reason)
	if svc.Spec.Job.GPUs != 0 {
		t.Errorf("the unplaceable spec is still the service's: %d GPUs", svc.Spec.Job.GPUs)
	}
	for _, j := range old {
		now, _ := a.fsm.Job(j.ID)
		if now.StopRequested || now.State != structs.JobRunning {
			t.Errorf("old replica %s: %s, stop requested %v (%s)", j.ID, now.State, now.StopRequested, now.Reason)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() error {
		for _, j := range a.fsm.ServiceReplicas("web") {
			if j.ServiceVersion == 2 && !j.State.Terminal() {
				return fmt.Errorf("replica %s of the unplaceable version is %s", j.ID, j.State)
			}
		}
		return nil
	})
	if got, _ := a.fsm.Job(batch.ID); got.State != structs.JobRunning {
		t.Errorf("the batch job is %s (%s), want it left running", got.State, got.Reason)
	}
}

// unhealthyFor reads how long a rollback's reason says a replica was
// unhealthy: "... unhealthy for 3s: ...".
var unhealthyFor = regexp.MustCompile(`unhealthy for (\d+)s: `)

// The spec's UnhealthyTimeout, not the 30 s default, bounds how long a new
// replica may fail its health check: a version that answers 503 on
// /health rolls back once it has been unhealthy for the spec's 2 s.
func TestRollout_TheSpecsUnhealthyTimeoutBoundsAnUnhealthyVersion(t *testing.T) {
	t.Parallel()
	a, _, c, spec := workloadService(t, 1)
	sick := filepath.Join(testutil.SharedDir(t), "sick")
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := spec
	bad.Job.Command = append(slices.Clone(spec.Job.Command), "--unhealthy-if", sick)
	// Long enough for a loaded machine to have the replica listening (and
	// answering 503) before the timeout, short of the default.
	bad.UnhealthyTimeout = structs.Duration(5 * time.Second)
	if _, err := c.UpdateService(context.Background(), "web", api.ServiceUpdateRequest{Spec: bad}); err != nil {
		t.Fatalf("update: %v", err)
	}
	svc := waitRollout(t, a, structs.RolloutRolledBack)
	reason := svc.Rollout.Reason
	m := unhealthyFor.FindStringSubmatch(reason)
	if !strings.HasPrefix(reason, "rolled back: replica r1 of version 2 unhealthy for ") || m == nil || !strings.Contains(reason, "503") {
		t.Fatalf("rollback reason %q, want replica r1 unhealthy for some seconds, answering 503", reason)
	}
	t.Logf("%s", reason)
	// At least the spec's timeout, and short of the default: the spec's
	// value decided.
	if n, _ := strconv.Atoi(m[1]); n < 5 || time.Duration(n)*time.Second >= time.Duration(structs.DefaultUnhealthyTimeout) {
		t.Fatalf("rolled back after %ds unhealthy, want at least the spec's 5s and under the default %s", n, structs.DefaultUnhealthyTimeout)
	}
	if d, err := c.Service(context.Background(), "web"); err != nil || d.Service.Spec.UnhealthyTimeout != 0 {
		t.Fatalf("after the rollback the spec is version 1's, with no unhealthy timeout of its own: %+v, %v", d, err)
	}
}

// An autoscaled service under load that would scale it up does not scale
// while a rollout is in progress: the leader's observation says it is
// paused, and the replicas stay as they are in every state the rollout
// is active in. Once the rollout has ended (here rolled back at its
// progress deadline: its version has a constraint no node meets) the
// autoscaler scales it up.
func TestAutoscale_PausesWhileARolloutIsInProgress(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	cfg.AutoscaleInterval = 200 * time.Millisecond
	a, admin, c := startAgentAdmin(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	spec := autoscaledSpec(t, 0)
	if _, err := c.CreateService(ctx, api.ServiceCreateRequest{Name: "web", Spec: spec,
		Autoscale: &structs.Autoscale{Min: 1, Max: 3, Metric: structs.AutoscaleInFlight, Target: 2}}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, a, "web", 1, true)

	// Record every state in which a rollout is active and the replicas
	// wanted are not the one the service had.
	var mu sync.Mutex
	var scaledInRollout []string
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ctx.Err() == nil {
			_, changed := a.fsm.Watch()
			if svc, ok := a.fsm.Service("web"); ok && svc.Rollout.Active() && svc.Replicas != 1 {
				mu.Lock()
				scaledInRollout = append(scaledInRollout, fmt.Sprintf("%d replicas (%s) in rollout %+v", svc.Replicas, svc.Reason, *svc.Rollout))
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-changed:
			}
		}
	}()

	stuck := spec
	stuck.Job.Constraints = map[string]string{"zone": "nowhere"}
	stuck.ProgressDeadline = structs.Duration(6 * time.Second)
	if _, err := c.UpdateService(ctx, "web", api.ServiceUpdateRequest{Spec: stuck}); err != nil {
		t.Fatalf("update: %v", err)
	}
	var load sync.WaitGroup
	for range 8 {
		load.Add(1)
		go func() {
			defer load.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.IngressAddr()+"/web/work?ms=300", nil)
				req.Header.Set(api.TokenHeader, admin)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	defer load.Wait()
	defer cancel()

	// The leader sees the load above the target, and says it is paused.
	testutil.WaitFor(t, 20*time.Second, func() error {
		d, err := c.Service(ctx, "web")
		if err != nil {
			return err
		}
		if o := d.Observed; o == nil || o.Value <= 2 || o.Paused != "paused: rollout to version 2 in progress" {
			return fmt.Errorf("observed %+v, want the load above the target, paused", d.Observed)
		}
		return nil
	})
	waitRollout(t, a, structs.RolloutRolledBack)
	testutil.WaitFor(t, 30*time.Second, func() error {
		svc, _ := a.fsm.Service("web")
		if svc.Replicas != 3 {
			return fmt.Errorf("the service wants %d replicas (%s), want 3 once the rollout is over", svc.Replicas, svc.Reason)
		}
		return nil
	})
	d, err := c.Service(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if d.Observed != nil && d.Observed.Paused != "" {
		t.Errorf("after the rollout the observation still says %q", d.Observed.Paused)
	}
	cancel()
	<-watched
	mu.Lock()
	defer mu.Unlock()
	if len(scaledInRollout) > 0 {
		t.Fatalf("scaled while a rollout was active: %q", scaledInRollout)
	}
}
