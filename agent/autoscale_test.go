package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// watchReplicas records every count of replicas the service wants, as
// the state changes, until ctx ends.
func watchReplicas(ctx context.Context, a *Agent, name string) func() []int {
	var mu sync.Mutex
	var seen []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, changed := a.fsm.Watch()
			if svc, ok := a.fsm.Service(name); ok {
				mu.Lock()
				if len(seen) == 0 || seen[len(seen)-1] != svc.Replicas {
					seen = append(seen, svc.Replicas)
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	}()
	return func() []int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), seen...)
	}
}

// autoscaledSpec is the spec of the autoscale tests' services: replicas
// of skein-workload serving HTTP on $PORT (with args added to its
// command) on gpus GPUs each, health-checked every 200 ms, given 1 s to
// drain.
func autoscaledSpec(t *testing.T, gpus int, args ...string) structs.ServiceSpec {
	cmd := append([]string{testutil.Workload(t), "--dir", testutil.SharedDir(t), "--serve-port-env", "PORT"}, args...)
	return structs.ServiceSpec{
		Job: structs.JobSpec{GPUs: gpus, Command: cmd},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond)},
		DrainTimeout: structs.Duration(time.Second),
	}
}

// A service of skein-workload replicas autoscaled 1-3 on inflight=2: a
// client holding eight slow requests through the ingress makes it scale
// up to 3, where it stays while the load lasts; once the load stops it
// scales back down to 1. The counts it wanted go up, then down, once.
func TestAutoscale_ScalesUpUnderLoadAndBackDownWithoutFlapping(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	cfg.AutoscaleInterval = 200 * time.Millisecond
	a, admin, c := startAgentAdmin(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watchReplicas(ctx, a, "web")

	_, err := c.CreateService(ctx, api.ServiceCreateRequest{
		Name: "web",
		Spec: autoscaledSpec(t, 0),
		Autoscale: &structs.Autoscale{Min: 1, Max: 3, Metric: structs.AutoscaleInFlight, Target: 2,
			DownWindow: structs.Duration(2 * time.Second)},
	})
	if err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, a, "web", 1, true)

	// Eight clients, each sending a slow request after another.
	var load sync.WaitGroup
	loadCtx, stopLoad := context.WithCancel(ctx)
	var served, failed atomic.Int64
	for range 8 {
		load.Add(1)
		go func() {
			defer load.Done()
			for loadCtx.Err() == nil {
				req, _ := http.NewRequestWithContext(loadCtx, http.MethodGet, a.IngressAddr()+"/web/work?ms=300", nil)
				req.Header.Set(api.TokenHeader, admin)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					if loadCtx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					served.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	waitReplicas(t, a, "web", 3, true)
	// The load goes on over three healthy replicas for 60 more requests
	// (well over a dozen of the leader's looks): it must not scale down.
	from := served.Load()
	testutil.WaitFor(t, 60*time.Second, func() error {
		if n := served.Load() - from; n < 60 {
			return fmt.Errorf("%d requests served over three replicas, want 60", n)
		}
		return nil
	})
	stopLoad()
	load.Wait()

	testutil.WaitFor(t, 60*time.Second, func() error {
		svc, _ := a.fsm.Service("web")
		if svc.Replicas != 1 {
			return fmt.Errorf("the service wants %d replicas (%s), want 1 once the load stopped", svc.Replicas, svc.Reason)
		}
		return nil
	})
	svc, _ := a.fsm.Service("web")
	cancel()
	counts := seen()
	// Up (by one or more steps) to 3, then down to 1: no count comes back.
	peak := 0
	for i := 1; i < len(counts); i++ {
		if counts[i] < counts[i-1] && peak == 0 {
			peak = i - 1
		}
		if peak > 0 && counts[i] > counts[i-1] {
			t.Fatalf("the service flapped: it wanted %v", counts)
		}
	}
	if len(counts) < 3 || counts[0] != 1 || counts[peak] != 3 || counts[len(counts)-1] != 1 {
		t.Fatalf("the service wanted %v; want 1 up to 3 and back to 1", counts)
	}
	if svc.NextReplica != 3 {
		t.Fatalf("%d replica jobs made, want 3: one scale up", svc.NextReplica)
	}
	t.Logf("wanted %v; %d requests served, %d failed; last: %s", counts, served.Load(), failed.Load(), svc.Reason)
}

// The autoscale route: the owner sets it (the replicas come within its
// bounds), another submitter may not, a manual scale is refused while it
// is on and allowed once it is off.
func TestServiceRoutes_AutoscaleSetRefusesManualScaleOff(t *testing.T) {
	t.Parallel()
	a, admin := aclAgent(t)
	ctx := context.Background()
	alice := clientFor(t, a, userToken(t, admin, "alice", structs.RoleSubmitter))
	bob := clientFor(t, a, userToken(t, admin, "bob", structs.RoleSubmitter))
	if _, err := alice.CreateService(ctx, sleepService("web", 1)); err != nil {
		t.Fatal(err)
	}
	as := &structs.Autoscale{Min: 2, Max: 4, Metric: structs.AutoscaleInFlight, Target: 5}
	_, err := bob.AutoscaleService(ctx, "web", as)
	wantStatus(t, err, http.StatusForbidden, "role submitter lacks jobs:any to autoscale another user's service")
	_, err = alice.AutoscaleService(ctx, "web", &structs.Autoscale{Min: 2, Max: 4, Metric: structs.AutoscaleGPU, Target: 80})
	wantStatus(t, err, http.StatusBadRequest, "autoscale.metric: gpu: the replicas hold no GPUs (the gpu metric needs replicas with gpus)")
	d, err := alice.AutoscaleService(ctx, "web", as)
	if err != nil || d.Service.Replicas != 2 || d.Service.Autoscale == nil || d.Service.Reason != "scaled 1→2: autoscale is 2-4" {
		t.Fatalf("autoscale: %+v, %v", d, err)
	}
	_, err = alice.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 3})
	wantStatus(t, err, http.StatusConflict, "service is autoscaled: web scales itself within 2-4 replicas; turn that off first (skein service autoscale web off)")
	if d, err = alice.AutoscaleService(ctx, "web", nil); err != nil || d.Service.Autoscale != nil || d.Service.Replicas != 2 {
		t.Fatalf("off: %+v, %v", d, err)
	}
	if d, err = alice.ScaleService(ctx, "web", api.ServiceScaleRequest{Replicas: 3}); err != nil || d.Service.Replicas != 3 {
		t.Fatalf("scale once off: %+v, %v", d, err)
	}
}

// In a cluster the load reaches the leader from every node: the requests
// held through a follower's ingress alone make the leader scale up.
func TestCluster_AutoscaleCountsTheLoadAtAFollowersIngress(t *testing.T) {
	t.Parallel()
	bin := testutil.Workload(t)
	tc := startClusterWith(t, 2, func(_ int, cfg *Config) {
		cfg.IngressPort = -1
		cfg.AutoscaleInterval = 200 * time.Millisecond
	})
	lead := tc.leader()
	follower := tc.agents[1-lead]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := tc.client(follower).CreateService(ctx, api.ServiceCreateRequest{
		Name: "web",
		Spec: structs.ServiceSpec{
			Job:    structs.JobSpec{Command: []string{bin, "--dir", testutil.SharedDir(t), "--serve-port-env", "PORT"}},
			Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health", Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond)},
			Public: true,
		},
		Autoscale: &structs.Autoscale{Min: 1, Max: 2, Metric: structs.AutoscaleInFlight, Target: 2},
	})
	if err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, follower, "web", 1, true)
	var load sync.WaitGroup
	for range 6 {
		load.Add(1)
		go func() {
			defer load.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, follower.IngressAddr()+"/web/work?ms=300", nil)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		svc, _ := tc.agents[lead].fsm.Service("web")
		if svc.Replicas != 2 {
			return fmt.Errorf("the service wants %d replicas (%s), want 2", svc.Replicas, svc.Reason)
		}
		return nil
	})
	// The follower's API asks the leader what it observed.
	testutil.WaitFor(t, 10*time.Second, func() error {
		d, err := tc.client(follower).Service(ctx, "web")
		if err != nil {
			return err
		}
		if d.Observed == nil || d.Observed.Value <= 0 {
			return fmt.Errorf("observed %+v, want the load", d.Observed)
		}
		return nil
	})
	cancel()
	load.Wait()
}

// A service autoscaled 0-2 on inflight=1 scales to zero once idle for its
// down window; a request through the ingress then is held, counted as
// the service's load, starts a replica, and is answered by it.
func TestAutoscale_AServiceScaledToZeroStartsAReplicaForARequestAndAnswersIt(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	cfg.AutoscaleInterval = 200 * time.Millisecond
	a, admin, c := startAgentAdmin(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watchReplicas(ctx, a, "web")

	_, err := c.CreateService(ctx, api.ServiceCreateRequest{
		Name:     "web",
		Replicas: 1,
		Spec:     autoscaledSpec(t, 0),
		Autoscale: &structs.Autoscale{Min: 0, Max: 2, Metric: structs.AutoscaleInFlight, Target: 1,
			DownWindow: structs.Duration(time.Second)},
	})
	if err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, a, "web", 1, true)
	testutil.WaitFor(t, 30*time.Second, func() error {
		svc, _ := a.fsm.Service("web")
		if svc.Replicas != 0 || len(runningReplicas(a, "web", nil)) != 0 {
			return fmt.Errorf("the idle service wants %d replicas (%s), %d running; want none", svc.Replicas, svc.Reason, len(runningReplicas(a, "web", nil)))
		}
		return nil
	})

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.IngressAddr()+"/web/work?ms=10", nil)
	req.Header.Set(api.TokenHeader, admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a request to the service scaled to zero: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request to the service scaled to zero got %d %q, want 200 from a replica started for it", resp.StatusCode, body)
	}
	svc, _ := a.fsm.Service("web")
	cancel()
	counts := seen()
	if len(counts) < 3 || counts[0] != 1 || counts[1] != 0 || counts[2] != 1 {
		t.Fatalf("the service wanted %v; want 1, 0 when idle, then 1 for the request", counts)
	}
	if want := "scaled 0→1: 1 requests held for a replica, target 1"; svc.Reason != want && !strings.HasPrefix(svc.Reason, "scaled 1→0") {
		t.Fatalf("reason %q, want %q (or the idle scale-down after it)", svc.Reason, want)
	}
	if a.proxy.InFlight("web")[""] != 0 {
		t.Fatal("the answered request is still counted as held")
	}
}
