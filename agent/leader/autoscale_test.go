package leader

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

// autoscaled registers service web of one replica, 1-4 on metric with
// target 10, up window 0 and down window 1m; its replicas hold a GPU for
// the gpu metric.
func (h *harness) autoscaled(metric string) {
	gpus := 0
	if metric == structs.AutoscaleGPU {
		gpus = 1
	}
	h.must(structs.ServiceRegisterType, structs.ServiceRegisterRequest{Service: structs.Service{
		ID: "svc-web", Name: "web", Owner: "alice", Replicas: 1, CreatedAt: time.Now().UTC(),
		Spec: structs.ServiceSpec{Job: structs.JobSpec{Command: []string{"serve"}, GPUs: gpus}},
		Autoscale: &structs.Autoscale{Min: 1, Max: 4, Metric: metric, Target: 10,
			DownWindow: structs.Duration(time.Minute)},
	}})
}

func (h *harness) replicas() (int, string) {
	svc, ok := h.f.Service("web")
	if !ok {
		h.t.Fatalf("service web is gone")
	}
	return svc.Replicas, svc.Reason
}

func TestLeader_AutoscaleSumsTheIngressesAndScalesUpFastDownSlowly(t *testing.T) {
	h := newHarness(t)
	h.autoscaled(structs.AutoscaleInFlight)
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// Two nodes' ingresses hold 20 and 15 requests: 35 for one replica.
	report := func(s int, a, b int64) {
		h.l.ReportLoads("n1", []structs.ServiceLoad{{Service: "web", InFlight: a}}, at(s))
		h.l.ReportLoads("n2", []structs.ServiceLoad{{Service: "web", InFlight: b}}, at(s))
	}
	report(0, 20, 15)
	h.l.autoscale(at(0))
	if n, why := h.replicas(); n != 4 || why != "scaled 1→4: 35 requests in flight per replica, target 10" {
		t.Fatalf("after the load: %d replicas (%q)", n, why)
	}
	if o, ok := h.l.Observed("web"); !ok || o.Value != 35 || !o.At.Equal(at(0).UTC()) {
		t.Fatalf("observed %+v, %v; want 35 at the look", o, ok)
	}
	// The same load over 4 replicas is within the tolerance: no change.
	before := h.idx
	report(5, 20, 20)
	h.l.autoscale(at(5))
	if h.idx != before {
		t.Fatalf("%d entries at a load on target; want none", h.idx-before)
	}
	// The load stops: nothing until a minute below and a minute since the scale.
	for s := 10; s < 60; s += 5 {
		report(s, 0, 0)
		h.l.autoscale(at(s))
	}
	if n, _ := h.replicas(); n != 4 {
		t.Fatalf("scaled down to %d within the down window", n)
	}
	for s := 60; s <= 75; s += 5 {
		report(s, 0, 0)
		h.l.autoscale(at(s))
	}
	if n, why := h.replicas(); n != 1 || why != "scaled 4→1: 0 requests in flight per replica, target 10" {
		t.Fatalf("after the down window: %d replicas (%q)", n, why)
	}
}

// GPU utilisation is averaged over every GPU the nodes report, not over
// the nodes: a node with three busy GPUs outweighs one with one idle GPU.
func TestLeader_AutoscaleAveragesGPUUtilisationOverTheGPUs(t *testing.T) {
	h := newHarness(t)
	h.autoscaled(structs.AutoscaleGPU)
	t0 := time.Now()
	h.l.ReportLoads("n1", []structs.ServiceLoad{{Service: "web", GPUUtil: 3 * 40, GPUs: 3}}, t0)
	h.l.ReportLoads("n2", []structs.ServiceLoad{{Service: "web", GPUUtil: 0, GPUs: 1}}, t0)
	h.l.autoscale(t0)
	if o, ok := h.l.Observed("web"); !ok || o.Value != 30 {
		t.Fatalf("observed %+v, %v; want 30 (120 %% over 4 GPUs)", o, ok)
	}
	if n, why := h.replicas(); n != 3 || why != "scaled 1→3: 30% GPU utilisation per replica, target 10" {
		t.Fatalf("%d replicas (%q), want 3", n, why)
	}
	// Reports without a GPU read say nothing: the service is left alone.
	h.l.ReportLoads("n1", []structs.ServiceLoad{{Service: "web"}}, t0.Add(time.Second))
	h.l.ReportLoads("n2", []structs.ServiceLoad{{Service: "web"}}, t0.Add(time.Second))
	h.l.autoscale(t0.Add(time.Second))
	if _, ok := h.l.Observed("web"); ok {
		t.Fatal("an observation from reports that read no GPU")
	}
}

func TestLeader_AutoscaleIgnoresStaleReportsAndANewLeaderDoesNotFlap(t *testing.T) {
	h := newHarness(t)
	h.autoscaled("gauge:queue")
	t0 := time.Now()
	h.l.ReportLoads("n1", []structs.ServiceLoad{{Service: "web", Gauges: map[string]float64{"a1": 30}}}, t0)
	// A report older than three intervals is a node that stopped reporting.
	h.l.autoscale(t0.Add(4 * DefaultAutoscaleInterval))
	if n, _ := h.replicas(); n != 1 {
		t.Fatalf("scaled to %d on a stale report", n)
	}
	if o, ok := h.l.Observed("web"); ok {
		t.Fatalf("observed %+v from a stale report", o)
	}
	h.l.ReportLoads("n1", []structs.ServiceLoad{{Service: "web", Gauges: map[string]float64{"a1": 30}}}, t0)
	h.l.autoscale(t0)
	if n, why := h.replicas(); n != 3 || why != "scaled 1→3: gauge queue 30 per replica, target 10" {
		t.Fatalf("gauge: %d replicas (%q)", n, why)
	}
	// A new leader (no memory) sees no load at once: no scale down
	// within the down window of the last scale.
	h.l.resetAutoscale()
	at := t0.Add(time.Second)
	h.l.ReportLoads("n1", []structs.ServiceLoad{{Service: "web", Gauges: map[string]float64{"a1": 0, "a2": 0, "a3": 0}}}, at)
	h.l.autoscale(at)
	if n, _ := h.replicas(); n != 3 {
		t.Fatalf("a new leader scaled to %d right after a scale", n)
	}
}
