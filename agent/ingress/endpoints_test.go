package ingress

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skein-dev/skein/internal/testutil"
	"github.com/skein-dev/skein/structs"
)

func TestPick_AFailedEndpointIsProbedByOneRequestAtATimeAfterItsCooldown(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	newEnd := func(name string, inFlight int64) *endpoint {
		e := &endpoint{allocID: name, inFlight: new(atomic.Int64), dial: new(dialState)}
		e.inFlight.Store(inFlight)
		return e
	}
	busy, failed := newEnd("busy", 5), newEnd("failed", 0)
	v := &view{ends: []*endpoint{busy, failed}}
	pick := func(at time.Time) string { return v.pick(map[*endpoint]bool{}, at).allocID }

	failed.dial.failed(now)
	if got := pick(now.Add(failCooldown - time.Millisecond)); got != "busy" {
		t.Errorf("within its cooldown the failed endpoint was picked (%s) over a busy one", got)
	}
	after := now.Add(failCooldown)
	if got := pick(after); got != "failed" {
		t.Fatalf("after its cooldown got %s, want the failed endpoint (fewer in flight) to be tried again", got)
	}
	// The request that picked it probes it: while it does, others keep
	// off it.
	failed.dial.probing.Store(true)
	if got := pick(after); got != "busy" {
		t.Errorf("while one request probes the failed endpoint another was sent to it too")
	}
	// The probe fails: a new cooldown starts.
	failed.dial.failed(after)
	if got := pick(after.Add(time.Second)); got != "busy" {
		t.Errorf("a failed probe did not start a new cooldown")
	}
	// The next probe connects: the endpoint is as good as any again.
	failed.dial.probing.Store(true)
	failed.dial.connected()
	if failed.dial.probing.Load() || failed.dial.failedAt.Load() != 0 {
		t.Error("a connection made did not clear the endpoint's failure")
	}
	if got := pick(after.Add(time.Second)); got != "failed" {
		t.Errorf("an endpoint that connected again was passed over (%s picked)", got)
	}
	// The only endpoint is tried even while it cools down or is probed.
	busy.dial.failed(now)
	busy.dial.probing.Store(true)
	alone := &view{ends: []*endpoint{busy}}
	if e := alone.pick(map[*endpoint]bool{}, now); e != busy {
		t.Error("the only endpoint was not picked while it cools down")
	}
}

func TestProxy_AProbeThatConnectsClearsTheReplicasFailure(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Replicas: 1})
	st.addReplica(t, "llama", addrOf(t, echo(t, "r0")), nil)
	p, srv := testProxy(t, st, nil)
	v, _ := p.view("llama")
	d := v.ends[0].dial
	d.failed(time.Now().Add(-2 * failCooldown))

	if code, body := get(t, srv, "/llama/x", nil); code != http.StatusOK || !strings.HasPrefix(body, "r0 GET /x ") {
		t.Fatalf("got %d %q, want r0's answer", code, body)
	}
	if d.failedAt.Load() != 0 || d.probing.Load() {
		t.Errorf("after a probe that connected: failedAt %d, probing %v; want 0, false", d.failedAt.Load(), d.probing.Load())
	}
}

func TestProxy_ARequestForAServiceScaledToZeroIsHeldAndCountedUntilAReplicaAnswers(t *testing.T) {
	st := newFakeState()
	st.addService(structs.Service{Name: "llama", Autoscale: &structs.Autoscale{Min: 0, Max: 2, Metric: structs.AutoscaleInFlight, Target: 1}})
	p, srv := testProxy(t, st, nil)

	answer := backgroundDo(srv, http.MethodPost, "/llama/v1/completions", "prompt")
	testutil.WaitFor(t, 15*time.Second, func() error {
		if n := p.InFlight("llama")[""]; n != 1 {
			return fmt.Errorf("%d requests counted as held, want 1", n)
		}
		return nil
	})
	st.addReplica(t, "llama", addrOf(t, echo(t, "r0")), nil)
	if got := <-answer; !strings.HasPrefix(got, "r0 POST /v1/completions") || !strings.HasSuffix(got, "body=prompt") {
		t.Fatalf("held request answered %q, want r0's answer with the body", got)
	}
	if n := p.InFlight("llama")[""]; n != 0 {
		t.Fatalf("%d requests still counted as held after the answer", n)
	}

	// A held request whose client goes away stops being counted.
	st.change(func() { st.replicas["llama"], st.allocs = nil, map[string][]*structs.Allocation{} })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/llama/x", nil)
		_, err := client.Do(req)
		done <- err
	}()
	testutil.WaitFor(t, 15*time.Second, func() error {
		if n := p.InFlight("llama")[""]; n != 1 {
			return fmt.Errorf("%d requests counted as held, want 1", n)
		}
		return nil
	})
	cancel()
	<-done
	testutil.WaitFor(t, 15*time.Second, func() error {
		if n := p.InFlight("llama")[""]; n != 0 {
			return fmt.Errorf("%d requests counted as held after the client went away, want 0", n)
		}
		return nil
	})

	// A service that does not scale to zero answers 503 at once.
	st.addService(structs.Service{Name: "batch", Replicas: 0})
	if code, body := get(t, srv, "/batch/x", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "scaled to 0") {
		t.Fatalf("got %d %q, want 503 saying it is scaled to 0", code, body)
	}
}
