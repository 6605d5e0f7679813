package agent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/skein-dev/skein/api"
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// BenchmarkAutoscaleReaction measures, on one idle agent with the
// production autoscale interval (leader.DefaultAutoscaleInterval), how
// long a service of skein-workload replicas autoscaled 1-2 on inflight=1
// takes to react to a step of load through the ingress: from the step to
// the scale committed ("decided"), to the new replica's process started
// ("started": the reaction without the workload's own start), and to the
// new replica healthy ("healthy", its health checked every 200 ms). Each
// iteration is a service of its own, deleted after.
func BenchmarkAutoscaleReaction(b *testing.B) {
	bin := testutil.Workload(b)
	shared := testutil.SharedDir(b)
	cfg := testConfig(b, b.TempDir())
	cfg.IngressPort = -1
	a, c := startBenchAgent(b, cfg)
	var decided, started, healthy []time.Duration
	for i := range b.N {
		name := fmt.Sprintf("web%d", i)
		ctx, cancel := context.WithCancel(context.Background())
		_, err := c.CreateService(ctx, api.ServiceCreateRequest{
			Name: name,
			Spec: structs.ServiceSpec{
				Job: structs.JobSpec{Command: []string{bin, "--dir", shared, "--serve-port-env", "PORT"}},
				Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
					Interval: structs.Duration(200 * time.Millisecond), Timeout: structs.Duration(200 * time.Millisecond)},
				DrainTimeout: structs.Duration(time.Second),
			},
			Autoscale: &structs.Autoscale{Min: 1, Max: 2, Metric: structs.AutoscaleInFlight, Target: 1},
		})
		if err != nil {
			b.Fatal(err)
		}
		waitReplicas(b, a, name, 1, true)
		// The step: four clients each holding a slow request.
		var load sync.WaitGroup
		t0 := time.Now()
		for range 4 {
			load.Add(1)
			go func() {
				defer load.Done()
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.IngressAddr()+"/"+name+"/work?ms=500", nil)
					if resp, err := http.DefaultClient.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			}()
		}
		allocs := waitReplicas(b, a, name, 2, true)
		healthy = append(healthy, time.Since(t0))
		svc, _ := a.fsm.Service(name)
		decided = append(decided, svc.ScaledAt.Sub(t0))
		newest := allocs[0]
		for _, al := range allocs[1:] {
			if al.StartedAt.After(newest.StartedAt) {
				newest = al
			}
		}
		started = append(started, newest.StartedAt.Sub(t0))
		cancel()
		load.Wait()
		if _, err := c.DeleteService(context.Background(), name); err != nil {
			b.Fatal(err)
		}
	}
	report(b, "decided", decided)
	report(b, "started", started)
	report(b, "healthy", healthy)
}
