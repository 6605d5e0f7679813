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
	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

// workloadService starts an agent with an ingress and creates web: n
// replicas of skein-workload serving on $PORT, checked on /health, with
// MODEL=v1 in their env. It waits until they are all healthy, and returns
// the agent with its admin token, a client holding it, and web's spec.
func workloadService(t *testing.T, n int) (*Agent, string, *api.Client, structs.ServiceSpec) {
	t.Helper()
	bin := testutil.Workload(t)
	cfg := testConfig(t, t.TempDir())
	cfg.IngressPort = -1
	a, token, c := startAgentAdmin(t, cfg)
	spec := structs.ServiceSpec{
		Job: structs.JobSpec{Command: []string{bin, "--dir", testutil.SharedDir(t), "--serve-port-env", "PORT"},
			Env: map[string]string{"MODEL": "v1"}},
		Health: &structs.HealthCheck{Kind: structs.HealthHTTP, Path: "/health",
			Interval: structs.Duration(100 * time.Millisecond), Timeout: structs.Duration(100 * time.Millisecond), Failures: 2},
		DrainTimeout: structs.Duration(10 * time.Second),
	}
	if _, err := c.CreateService(context.Background(), api.ServiceCreateRequest{Name: "web", Replicas: n, Spec: spec}); err != nil {
		t.Fatalf("create the service: %v", err)
	}
	waitReplicas(t, a, "web", n, true)
	return a, token, c, spec
}

// load sends requests to /web/work?ms=ms through the agent's ingress,
// with a token, from workers goroutines until stopped, and counts them and those that
// failed (an error or any status but 200), keeping the first failures.
type load struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	failures     []string
	stop         chan struct{}
	done         sync.WaitGroup
}

func startLoad(t *testing.T, a *Agent, token string, workers, ms int) *load {
	l := &load{stop: make(chan struct{})}
	hc := tokenClient(token)
	for range workers {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.sent.Add(1)
				resp, err := hc.Get(fmt.Sprintf("%s/web/work?ms=%d", a.IngressAddr(), ms))
				what := ""
				if err != nil {
					what = err.Error()
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						what = fmt.Sprintf("%d %s", resp.StatusCode, b)
					}
				}
				if what != "" {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.failures) < 5 {
						l.failures = append(l.failures, what)
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

// end stops the load and waits for the requests in flight.
func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.done.Wait()
}

// check ends the load and fails the test unless it sent at least min
// requests, none of them failed.
func (l *load) check(t *testing.T, min int64) {
	t.Helper()
	l.end()
	if n := l.failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed, first: %q", n, l.sent.Load(), l.failures)
	}
	if n := l.sent.Load(); n < min {
		t.Errorf("only %d requests sent, want at least %d", n, min)
	}
}

// waitRollout waits until web's rollout is in state, and returns the
// service.
func waitRollout(t *testing.T, a *Agent, state string) *structs.Service {
	t.Helper()
	var svc *structs.Service
	testutil.WaitFor(t, 90*time.Second, func() error {
		svc, _ = a.fsm.Service("web")
		if svc == nil || svc.Rollout == nil || svc.Rollout.State != state {
			var reps []string
			for _, j := range a.fsm.ServiceReplicas("web") {
				reps = append(reps, fmt.Sprintf("%s v%d %s (%s)", j.ID, j.ServiceVersion, j.State, j.Reason))
			}
			return fmt.Errorf("rollout %+v, want %s; replicas: %s", svc.Rollout, state, strings.Join(reps, ", "))
		}
		return nil
	})
	return svc
}

// wantedReplicas are web's replica jobs that have not ended and are not
// being stopped.
func wantedReplicas(a *Agent) []*structs.Job {
	var out []*structs.Job
	for _, j := range a.fsm.ServiceReplicas("web") {
		if !j.State.Terminal() && !j.StopRequested {
			out = append(out, j)
		}
	}
	return out
}

// A service of two replicas updated with a new env under a steady load
// through the ingress: every replica ends on the new version, running
// the new env, and not one request fails while old replicas drain.
func TestRollout_UpdateUnderLoadFailsNoRequest(t *testing.T) {
	t.Parallel()
	a, token, c, spec := workloadService(t, 2)
	l := startLoad(t, a, token, 6, 300)

	spec.Job.Env = map[string]string{"MODEL": "v2"}
	d, err := c.UpdateService(context.Background(), "web", api.ServiceUpdateRequest{Spec: spec})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if d.Service.Version != 2 || d.Service.Rollout == nil || d.Service.Rollout.MaxSurge != 1 {
		t.Fatalf("update answered version %d, rollout %+v", d.Service.Version, d.Service.Rollout)
	}
	svc := waitRollout(t, a, structs.RolloutDone)
	// The load runs on until the old replicas have drained and ended.
	testutil.WaitFor(t, 60*time.Second, func() error {
		for _, j := range a.fsm.ServiceReplicas("web") {
			if j.ServiceVersion == 1 && !j.State.Terminal() {
				return fmt.Errorf("old replica %s is %s (%s)", j.ID, j.State, j.Reason)
			}
		}
		return nil
	})
	waitReplicas(t, a, "web", 2, true)
	l.check(t, 20)

	reps := wantedReplicas(a)
	if len(reps) != 2 {
		t.Fatalf("%d replicas wanted after the rollout, want 2", len(reps))
	}
	for _, j := range reps {
		if j.ServiceVersion != 2 || j.Spec.Env["MODEL"] != "v2" {
			t.Errorf("replica %s after the rollout: version %d, env %v", j.ID, j.ServiceVersion, j.Spec.Env)
		}
	}
	for _, j := range a.fsm.ServiceReplicas("web") {
		if j.ServiceVersion == 1 && j.State != structs.JobCancelled {
			t.Errorf("old replica %s ended %s (%s), want cancelled", j.ID, j.State, j.Reason)
		}
	}
	if svc.PrevSpec != nil {
		t.Errorf("a finished rollout keeps the previous spec")
	}
}

// An update to a version whose replicas exit at once (skein-workload
// exits with code 2 on a flag it does not know) is rolled back,
// saying which replica failed how; the old replicas keep serving
// throughout (max unavailable 0: none of them is stopped).
func TestRollout_AFailingVersionIsRolledBack(t *testing.T) {
	t.Parallel()
	a, token, c, spec := workloadService(t, 2)
	old := wantedReplicas(a)
	l := startLoad(t, a, token, 2, 20)

	bad := spec
	bad.Job.Command = append(slices.Clone(spec.Job.Command), "--no-such-flag")
	if _, err := c.UpdateService(context.Background(), "web", api.ServiceUpdateRequest{Spec: bad}); err != nil {
		t.Fatalf("update: %v", err)
	}
	svc := waitRollout(t, a, structs.RolloutRolledBack)
	l.check(t, 10)

	r := svc.Rollout
	if svc.Version != 1 || r.Version != 1 || r.From != 2 || r.Reason != "rolled back: replica r2 of version 2 crash-looping: exited with code 2" {
		t.Errorf("after the rollback: version %d, rollout %+v", svc.Version, r)
	}
	if slices.Contains(svc.Spec.Job.Command, "--no-such-flag") {
		t.Errorf("the failed spec is still the service's: %v", svc.Spec.Job.Command)
	}
	for _, j := range old {
		now, _ := a.fsm.Job(j.ID)
		if now.StopRequested || now.State != structs.JobRunning {
			t.Errorf("old replica %s: %s, stop requested %v (%s)", j.ID, now.State, now.StopRequested, now.Reason)
		}
	}
	for _, j := range a.fsm.ServiceReplicas("web") {
		if j.ServiceVersion == 2 && !j.State.Terminal() {
			t.Errorf("replica %s of the failed version is still %s", j.ID, j.State)
		}
	}
}

// A scale down while slow requests are in flight on the replica it stops:
// the replica leaves the ingress's endpoints, finishes them, then ends.
func TestRollout_ScaleDownDrainsRequestsInFlight(t *testing.T) {
	t.Parallel()
	a, token, c, _ := workloadService(t, 2)
	var stopped *structs.Allocation
	for _, al := range runningReplicas(a, "web", nil) {
		if al.JobID == wantedReplicas(a)[1].ID {
			stopped = al
		}
	}
	if stopped == nil {
		t.Fatal("no running allocation of the newest replica")
	}

	const n = 6
	type answer struct {
		code int
		body string
		err  error
	}
	answers := make(chan answer, n)
	hc := tokenClient(token)
	for range n {
		go func() {
			resp, err := hc.Get(a.IngressAddr() + "/web/work?ms=4000")
			if err != nil {
				answers <- answer{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{code: resp.StatusCode, body: string(b)}
		}()
	}
	// Wait until the replica to be stopped has some of them.
	testutil.WaitFor(t, 30*time.Second, func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", stopped.MasterPort))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "skein_workload_in_flight ") || strings.Contains(string(b), "skein_workload_in_flight 0\n") {
			return fmt.Errorf("replica to stop has no request in flight: %s", b)
		}
		return nil
	})
	if _, err := c.ScaleService(context.Background(), "web", api.ServiceScaleRequest{Replicas: 1}); err != nil {
		t.Fatalf("scale: %v", err)
	}
	fromStopped := 0
	for range n {
		ans := <-answers
		if ans.err != nil || ans.code != http.StatusOK {
			t.Errorf("request in flight during the scale down: %d %q %v", ans.code, ans.body, ans.err)
		}
		if strings.Contains(ans.body, "alloc="+stopped.ID) {
			fromStopped++
		}
	}
	if fromStopped == 0 {
		t.Error("no request was answered by the replica stopped")
	}
	testutil.WaitFor(t, 30*time.Second, func() error {
		if al, _ := a.fsm.Alloc(stopped.ID); al.Live() {
			return fmt.Errorf("stopped replica's allocation is %s", al.State)
		}
		return nil
	})
}
