package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/gpu"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// A job on two simulated GPUs writes its utilisation file: the agent's
// telemetry reads its GPUs at what it wrote, the others idle, every
// sample labelled simulated; once the job ends its GPUs read idle again.
func TestTelemetry_SimulatedGPUsReadWhatTheirJobWrites(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.TelemetryPeriod = 50 * time.Millisecond
	a, c := startAgent(t, cfg)
	done := testutil.SharedDir(t) + "/done"
	job := submit(t, c, 2, "/bin/sh", "-c",
		`echo "75 2048" > "$SKEIN_SIM_GPU_UTIL_FILE"; until [ -e `+done+` ]; do sleep 0.05; done`)
	var held []string
	testutil.WaitFor(t, 30*time.Second, func() error {
		allocs := a.fsm.Allocs(job.ID)
		if len(allocs) != 1 || allocs[0].State != structs.AllocRunning {
			return fmt.Errorf("the job is not running yet")
		}
		held = allocs[0].GPUs
		for _, s := range a.telemetry.Sample() {
			busy := slices.Contains(held, s.UUID)
			want := gpu.Sample{Index: s.Index, UUID: s.UUID, Model: s.Model, Simulated: true, Has: gpu.HasUtil | gpu.HasMemory,
				MemTotalMiB: 80 << 10, At: s.At}
			if busy {
				want.UtilPercent, want.MemUsedMiB = 75, 2048
			}
			if s != want {
				return fmt.Errorf("GPU %d (held %t): %+v, want %+v", s.Index, busy, s, want)
			}
		}
		return nil
	})
	if n := len(a.telemetry.Sample()); n != 4 {
		t.Fatalf("%d samples, want one per simulated GPU", n)
	}
	if err := writeFile(done); err != nil {
		t.Fatal(err)
	}
	waitJobState(t, c, job.ID, structs.JobSucceeded)
	testutil.WaitFor(t, 30*time.Second, func() error {
		for _, s := range a.telemetry.Sample() {
			if s.UtilPercent != 0 || s.MemUsedMiB != 0 {
				return fmt.Errorf("GPU %d reads %v %% and %d MiB after its job ended", s.Index, s.UtilPercent, s.MemUsedMiB)
			}
		}
		return nil
	})
}

// A service of skein-workload replicas on one simulated GPU each,
// autoscaled 1-3 on gpu=50, each replica reporting its GPU 25 % busy per
// request in flight: eight clients holding slow requests through the
// ingress make it scale up to 3, where it stays while the load lasts;
// once the load stops it scales back down to 1, without flapping.
func TestAutoscale_OnSimulatedGPUUtilisationScalesUpAndBackDown(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	cfg.AutoscaleInterval = 200 * time.Millisecond
	cfg.TelemetryPeriod = 100 * time.Millisecond
	a, admin, c := startAgentAdmin(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watchReplicas(ctx, a, "web")

	_, err := c.CreateService(ctx, api.ServiceCreateRequest{
		Name: "web",
		Spec: autoscaledSpec(t, 1, "--sim-gpu-util-per-request", "25"),
		Autoscale: &structs.Autoscale{Min: 1, Max: 3, Metric: structs.AutoscaleGPU, Target: 50,
			DownWindow: structs.Duration(2 * time.Second)},
	})
	if err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, a, "web", 1, true)
	// Idle, the replica's GPU reads 0 %: the service stays at 1.
	testutil.WaitFor(t, 30*time.Second, func() error {
		o, ok := a.leader.Observed("web")
		if !ok || o.Value != 0 {
			return fmt.Errorf("observed %+v (%t), want 0 %% from the idle replica", o, ok)
		}
		return nil
	})

	stopLoad, served := slowLoad(ctx, a, admin, 8)
	waitReplicas(t, a, "web", 3, true)
	svc, _ := a.fsm.Service("web")
	if !strings.Contains(svc.Reason, "% GPU utilisation per replica, target 50") {
		t.Errorf("reason %q, want the GPU utilisation", svc.Reason)
	}
	// The load goes on over three replicas for 60 more requests: 8
	// requests over 3 replicas keep their GPUs above the target, so it
	// must not scale down.
	from := served.Load()
	testutil.WaitFor(t, 60*time.Second, func() error {
		if n := served.Load() - from; n < 60 {
			return fmt.Errorf("%d requests served over three replicas, want 60", n)
		}
		return nil
	})
	stopLoad()

	testutil.WaitFor(t, 60*time.Second, func() error {
		svc, _ := a.fsm.Service("web")
		if svc.Replicas != 1 {
			return fmt.Errorf("the service wants %d replicas (%s), want 1 once the load stopped", svc.Replicas, svc.Reason)
		}
		return nil
	})
	svc, _ = a.fsm.Service("web")
	cancel()
	counts := seen()
	peak := slices.Index(counts, 3)
	if counts[0] != 1 || peak < 0 || counts[len(counts)-1] != 1 {
		t.Fatalf("the service wanted %v; want 1 up to 3 and back to 1", counts)
	}
	for i := 1; i < len(counts); i++ {
		if up := counts[i] > counts[i-1]; up != (i <= peak) {
			t.Fatalf("the service flapped: it wanted %v", counts)
		}
	}
	if !strings.Contains(svc.Reason, "→1: 0% GPU utilisation per replica, target 50") {
		t.Errorf("last reason %q, want the scale down for idle GPUs", svc.Reason)
	}
	t.Logf("wanted %v; %d requests served; last: %s", counts, served.Load(), svc.Reason)
}

// slowLoad runs n clients through a's ingress, with token, each sending a
// slow request to web after another, until the returned stop is called;
// it counts the requests served.
func slowLoad(ctx context.Context, a *Agent, token string, n int) (stop func(), served *atomic.Int64) {
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	served = &atomic.Int64{}
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.IngressAddr()+"/web/work?ms=300", nil)
				req.Header.Set(api.TokenHeader, token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					served.Add(1)
				}
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}, served
}
