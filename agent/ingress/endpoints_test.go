package ingress

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
