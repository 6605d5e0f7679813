package leader

import (
	"sync"
	"time"

	"github.com/skein-dev/skein/sched"
	"github.com/skein-dev/skein/structs"
)

// DefaultAutoscaleInterval is how often, by default, nodes report the
// load of autoscaled services and the leader looks at it.
const DefaultAutoscaleInterval = 5 * time.Second

// staleLoads is how many intervals a node's load report counts for: one
// older than that is a node that stopped reporting, and is ignored.
const staleLoads = 3

// autoscaler is the leader's memory for autoscaling: the latest load
// report of each node, and each service's history of looks (by service
// ID). None of it is replicated: a new leader starts with none, and
// sched.Autoscale reads Service.ScaledAt so that it does not flap.
type autoscaler struct {
	mu      sync.Mutex
	loads   map[string]nodeLoads
	history map[string]sched.AutoscaleHistory
	// observed is each service's latest observation, by name.
	observed map[string]structs.AutoscaleObservation
}

type nodeLoads struct {
	at    time.Time
	loads []structs.ServiceLoad
}

// ReportLoads keeps a node's latest view of the autoscaled services'
// load (structs.ServiceLoad), seen at `at`; it replaces the node's
// previous one.
func (l *Leader) ReportLoads(nodeID string, loads []structs.ServiceLoad, at time.Time) {
	a := &l.as
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loads == nil {
		a.loads = map[string]nodeLoads{}
	}
	a.loads[nodeID] = nodeLoads{at: at, loads: loads}
}

func (l *Leader) autoscaleInterval() time.Duration {
	if l.cfg.AutoscaleInterval > 0 {
		return l.cfg.AutoscaleInterval
	}
	return DefaultAutoscaleInterval
}

// autoscaleLoop looks at every autoscaled service at each interval while
// this node leads (autoscale). It starts and ends with no history.
func (l *Leader) autoscaleLoop(stop <-chan struct{}) {
	l.resetAutoscale()
	defer l.resetAutoscale()
	tick := time.NewTicker(l.autoscaleInterval())
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		l.autoscale(time.Now())
	}
}

func (l *Leader) resetAutoscale() {
	l.as.mu.Lock()
	l.as.history = map[string]sched.AutoscaleHistory{}
	l.as.observed = map[string]structs.AutoscaleObservation{}
	l.as.mu.Unlock()
}

// Observed returns the latest observation of an autoscaled service's
// load while this node leads, and false when it has none.
func (l *Leader) Observed(service string) (structs.AutoscaleObservation, bool) {
	l.as.mu.Lock()
	defer l.as.mu.Unlock()
	o, ok := l.as.observed[service]
	return o, ok
}

// autoscale takes one look, at now, at every autoscaled service: the
// metric per replica from the nodes' fresh reports, and sched.Autoscale's
// decision, committed as a ServiceScale entry with its reason when it
// changes the replicas. A service no fresh report covers is left alone,
// and its history and observation forgotten. One with a rollout in
// progress is left alone too (sched.Autoscale pauses), its observation
// saying so.
func (l *Leader) autoscale(now time.Time) {
	services := l.fsm.Services()
	l.as.mu.Lock()
	if l.as.history == nil {
		l.as.history = map[string]sched.AutoscaleHistory{}
		l.as.observed = map[string]structs.AutoscaleObservation{}
	}
	fresh := l.freshLoads(now)
	seen := map[string]bool{}
	clear(l.as.observed)
	type scale struct {
		req structs.ServiceScaleRequest
		id  string
	}
	var scales []scale
	for _, svc := range services {
		if svc.Autoscale == nil || svc.Deleted {
			continue
		}
		observed, ok := observe(svc, fresh)
		if !ok {
			continue
		}
		seen[svc.ID] = true
		d := sched.Autoscale(sched.AutoscaleLook{Service: svc, Observed: observed, Now: now, History: l.as.history[svc.ID]})
		l.as.observed[svc.Name] = structs.AutoscaleObservation{Value: observed, At: now.UTC(), Paused: d.Paused}
		l.as.history[svc.ID] = d.History
		if d.Replicas != svc.Replicas {
			scales = append(scales, scale{structs.ServiceScaleRequest{Name: svc.Name, Replicas: d.Replicas, Reason: d.Reason, At: now.UTC()}, svc.ID})
		}
	}
	for id := range l.as.history {
		if !seen[id] {
			delete(l.as.history, id)
		}
	}
	l.as.mu.Unlock()
	for _, s := range scales {
		if _, err := l.cfg.Apply(structs.ServiceScaleType, s.req); err != nil {
			l.log.Warn("autoscale", "service", s.req.Name, "replicas", s.req.Replicas, "error", err)
			continue
		}
		l.log.Info("autoscaled", "service", s.req.Name, "reason", s.req.Reason)
	}
}

// freshLoads returns the loads of the nodes that reported within
// staleLoads intervals of now, and forgets the others. The caller holds
// l.as.mu.
func (l *Leader) freshLoads(now time.Time) []structs.ServiceLoad {
	var out []structs.ServiceLoad
	for id, nl := range l.as.loads {
		if now.Sub(nl.at) > staleLoads*l.autoscaleInterval() {
			delete(l.as.loads, id)
			continue
		}
		out = append(out, nl.loads...)
	}
	return out
}

// observe returns the metric per replica of svc from the nodes' loads:
// for in flight, every node's ingress's count summed, over the replicas
// the service wants; for a gauge, the mean over the replicas that
// report it; for GPU utilisation, the mean over the GPUs the running
// replicas hold, on every node (which, replicas holding as many GPUs
// each, is the mean per replica). False when no node reported it.
func observe(svc *structs.Service, loads []structs.ServiceLoad) (float64, bool) {
	var sum float64
	n := 0
	_, gauge := svc.Autoscale.Gauge()
	for _, ld := range loads {
		if ld.Service != svc.Name {
			continue
		}
		switch {
		case svc.Autoscale.Metric == structs.AutoscaleGPU:
			sum += ld.GPUUtil
			n += ld.GPUs
		case gauge:
			for _, v := range ld.Gauges {
				sum += v
				n++
			}
		default:
			sum += float64(ld.InFlight)
			n = max(svc.Replicas, 1)
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
