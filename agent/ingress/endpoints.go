package ingress

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skein-dev/skein/structs"
)

// failCooldown is how long an endpoint that refused a connection is
// passed over while others are left: a replica whose node died costs
// one failed dial, not one per request. After it, one request at a time
// tries the endpoint again (a probe) until one connects, so the requests
// in flight when the cooldown ends do not all wait on a dead node's dial.
const failCooldown = 5 * time.Second

// endpoint is one replica the ingress may send a service's requests to.
type endpoint struct {
	allocID string
	addr    string // host:port
	// inFlight counts the requests this node's ingress has at the
	// replica now; dial is how connecting to it went. Both outlive the
	// view that made the endpoint, for as long as the replica is one.
	inFlight *atomic.Int64
	dial     *dialState
}

// dialState is how connecting to one replica went lately.
type dialState struct {
	// failedAt is when a connection to the replica last failed (unix
	// nanoseconds), 0 when none has since one was made.
	failedAt atomic.Int64
	// probing is set while a request tries the replica again after its
	// cooldown.
	probing atomic.Bool
}

// usable says whether the endpoint is one to prefer at now: no
// connection to it failed since the last that was made, or one did more
// than failCooldown ago and no other request is trying it again.
func (d *dialState) usable(now time.Time) bool {
	at := d.failedAt.Load()
	return at == 0 || now.UnixNano()-at >= int64(failCooldown) && !d.probing.Load()
}

// failed records a connection to the replica that could not be made.
func (d *dialState) failed(now time.Time) {
	d.failedAt.Store(now.UnixNano())
	d.probing.Store(false)
}

// connected records a connection to the replica that was made.
func (d *dialState) connected() {
	if d.failedAt.Load() != 0 {
		d.failedAt.Store(0)
		d.probing.Store(false)
	}
}

// waiting is a replica that is no endpoint now, and why (for the 503).
type waiting struct {
	kind waitKind
	// startedAt and grace tell a replica still in its grace from one
	// that failed its checks; reason is its last health's.
	startedAt time.Time
	grace     time.Duration
	reason    string
}

type waitKind int

const (
	waitQueued    waitKind = iota // no live allocation: queued, or waiting out its backoff
	waitStarting                  // placed, not running yet, or running without a passed check
	waitUnhealthy                 // running, its health check failing
	waitStopping                  // running, asked to stop
	waitNodeDown                  // running on a node the cluster marked down
)

// view is what the ingress knows of one service at one index of the
// state: the service and its endpoints, and the replicas that are none.
type view struct {
	index   uint64
	svc     *structs.Service
	ends    []*endpoint
	waiting []waiting
}

// makeView reads a service's endpoints from the state: the running
// allocations of its replica jobs that are not asked to stop, on nodes
// not down, healthy or without a health check. Counters of endpoints
// that were endpoints in old carry over.
func makeView(st State, svc *structs.Service, index uint64, old *view) *view {
	v := &view{index: index, svc: svc}
	counters := map[string]*endpoint{}
	if old != nil {
		for _, e := range old.ends {
			counters[e.allocID] = e
		}
	}
	var grace time.Duration
	if h := svc.Spec.Health; h != nil {
		grace = time.Duration(h.Grace)
	}
	for _, job := range st.ServiceReplicas(svc.Name) {
		if job.State.Terminal() {
			continue
		}
		var live *structs.Allocation
		for _, a := range st.Allocs(job.ID) {
			if a.Live() {
				live = a
			}
		}
		if live == nil {
			v.waiting = append(v.waiting, waiting{kind: waitQueued})
			continue
		}
		addr, up := endpointAddr(st, live)
		switch {
		case live.State != structs.AllocRunning:
			v.waiting = append(v.waiting, waiting{kind: waitStarting})
		case live.DesiredState == structs.DesiredStop:
			v.waiting = append(v.waiting, waiting{kind: waitStopping})
		case !up:
			v.waiting = append(v.waiting, waiting{kind: waitNodeDown})
		case svc.Spec.Health != nil && (live.Health == nil || !live.Health.Healthy):
			w := waiting{kind: waitUnhealthy, startedAt: live.StartedAt, grace: grace}
			if live.Health == nil || live.Health.Starting {
				w.kind = waitStarting
			} else {
				w.reason = live.Health.Reason
			}
			v.waiting = append(v.waiting, w)
		default:
			e := &endpoint{allocID: live.ID, addr: addr, inFlight: new(atomic.Int64), dial: new(dialState)}
			if prev, ok := counters[live.ID]; ok && prev.addr == addr {
				e.inFlight, e.dial = prev.inFlight, prev.dial
			}
			v.ends = append(v.ends, e)
		}
	}
	return v
}

// endpointAddr is where a running allocation's replica listens: its
// node's advertised host and the allocation's port. up is false for a
// node the cluster marked down or gone, or one without an address.
func endpointAddr(st State, a *structs.Allocation) (addr string, up bool) {
	n, ok := st.Node(a.NodeID)
	if !ok || n.Status == structs.NodeDown || n.Status == structs.NodeLeft || a.MasterPort == 0 {
		return "", false
	}
	host, _, err := net.SplitHostPort(n.Addresses.Raft)
	if err != nil || host == "" {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(a.MasterPort)), true
}

// pick returns the endpoint with the fewest requests in flight through
// this node, among those not in tried, passing over those that are not
// usable (a connection refused within failCooldown, or one being probed
// after it) while others are left; ties go to one at random. nil when
// every endpoint was tried.
func (v *view) pick(tried map[*endpoint]bool, now time.Time) *endpoint {
	var best []*endpoint
	bestCool := true
	var least int64
	for _, e := range v.ends {
		if tried[e] {
			continue
		}
		cool := e.dial.usable(now)
		n := e.inFlight.Load()
		switch {
		case best == nil, cool && !bestCool, cool == bestCool && n < least:
			best, bestCool, least = append(best[:0], e), cool, n
		case cool == bestCool && n == least:
			best = append(best, e)
		}
	}
	if len(best) == 0 {
		return nil
	}
	return best[rand.IntN(len(best))]
}

// whyNone says why the service has no endpoint, for the 503 answer:
// "service llama has no healthy replica: 2 starting, 1 unhealthy (GET
// /health: 503 (3 failures in a row))".
func (v *view) whyNone(now time.Time) string {
	name := v.svc.Name
	if v.svc.Deleted {
		return "service " + name + " is being deleted"
	}
	if len(v.waiting) == 0 {
		if v.svc.Replicas == 0 {
			return "service " + name + " has no healthy replica: it is scaled to 0"
		}
		return "service " + name + " has no healthy replica: none is placed yet"
	}
	counts := map[waitKind]int{}
	var unhealthy string
	for _, w := range v.waiting {
		k := w.kind
		if k == waitUnhealthy && now.Sub(w.startedAt) < w.grace {
			k = waitStarting
		}
		if k == waitUnhealthy && unhealthy == "" {
			unhealthy = w.reason
		}
		counts[k]++
	}
	var parts []string
	for _, k := range []struct {
		kind waitKind
		word string
	}{{waitStarting, "starting"}, {waitUnhealthy, "unhealthy"}, {waitQueued, "queued"}, {waitStopping, "stopping"}, {waitNodeDown, "on a node that is down"}} {
		if n := counts[k.kind]; n > 0 {
			part := fmt.Sprintf("%d %s", n, k.word)
			if k.kind == waitUnhealthy && unhealthy != "" {
				part += " (" + unhealthy + ")"
			}
			parts = append(parts, part)
		}
	}
	return "service " + name + " has no healthy replica: " + strings.Join(parts, ", ")
}
