package fsm

import (
	"strings"
	"testing"

	"github.com/skein-dev/skein/structs"
)

// autoscale applies a ServiceAutoscale entry and returns Apply's answer.
func (h *harness) autoscale(name string, a *structs.Autoscale) any {
	h.t.Helper()
	return h.apply(structs.ServiceAutoscaleType, structs.ServiceAutoscaleRequest{Name: name, Autoscale: a, At: h.at()})
}

func TestFSM_ServiceAutoscale_SetClampsReplicasClearKeepsThem(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("web", 1, 0))
	a := &structs.Autoscale{Min: 3, Max: 5, Metric: structs.AutoscaleInFlight, Target: 10}
	got, ok := h.autoscale("web", a).(*structs.Service)
	if !ok {
		t.Fatalf("autoscale refused")
	}
	if got.Replicas != 3 || len(replicaIDs(h.f, "web")) != 3 {
		t.Fatalf("replicas = %d (%d jobs), want 3: clamped to min", got.Replicas, len(replicaIDs(h.f, "web")))
	}
	if got.Reason != "scaled 1→3: autoscale is 3-5" || got.ScaledAt.IsZero() {
		t.Fatalf("reason %q, scaled at %v", got.Reason, got.ScaledAt)
	}
	if got.Autoscale.DownWindow != structs.DefaultAutoscaleDownWindow || got.Autoscale.Tolerance != structs.DefaultAutoscaleTolerance {
		t.Fatalf("defaults not filled: %+v", got.Autoscale)
	}
	// Within the bounds: nothing scales, ScaledAt stays.
	scaledAt := got.ScaledAt
	got = h.autoscale("web", &structs.Autoscale{Min: 1, Max: 4, Metric: "gauge:vllm:num_requests_waiting", Target: 5}).(*structs.Service)
	if got.Replicas != 3 || !got.ScaledAt.Equal(scaledAt) || got.Autoscale.Max != 4 {
		t.Fatalf("in bounds: replicas %d, scaled at %v (was %v), autoscale %+v", got.Replicas, got.ScaledAt, scaledAt, got.Autoscale)
	}
	got = h.autoscale("web", nil).(*structs.Service)
	if got.Autoscale != nil || got.Replicas != 3 {
		t.Fatalf("off: autoscale %+v, replicas %d", got.Autoscale, got.Replicas)
	}
}

func TestFSM_ServiceScale_StampsScaledAtOnChangeOnly(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("web", 1, 0))
	h.scale("web", 2, "")
	svc, _ := h.f.Service("web")
	first := svc.ScaledAt
	if first.IsZero() {
		t.Fatalf("scaled at not set")
	}
	h.scale("web", 2, "")
	if svc, _ = h.f.Service("web"); !svc.ScaledAt.Equal(first) {
		t.Fatalf("a scale to the same count moved ScaledAt: %v → %v", first, svc.ScaledAt)
	}
}

func TestFSM_ServiceRegister_WithAutoscaleClampsReplicas(t *testing.T) {
	h := newHarness(t)
	svc := service("web", 9, 0)
	svc.Autoscale = &structs.Autoscale{Min: 1, Max: 3, Metric: structs.AutoscaleInFlight, Target: 2}
	if got := h.registerService(svc); got.Replicas != 3 {
		t.Fatalf("replicas = %d, want 3", got.Replicas)
	}
}

func TestFSM_ServiceAutoscale_RefusesBadRequests(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("web", 1, 0))
	cases := []struct {
		name string
		svc  string
		a    *structs.Autoscale
		want string
	}{
		{"unknown service", "nope", nil, "no such service"},
		{"min below zero", "web", &structs.Autoscale{Min: -1, Max: 2, Metric: "inflight", Target: 1}, "autoscale.min"},
		{"scale to zero on a gauge", "web", &structs.Autoscale{Min: 0, Max: 2, Metric: "gauge:q", Target: 1}, "needs the inflight metric"},
		{"max zero", "web", &structs.Autoscale{Min: 0, Max: 0, Metric: "inflight", Target: 1}, "autoscale.max"},
		{"max below min", "web", &structs.Autoscale{Min: 3, Max: 2, Metric: "inflight", Target: 1}, "autoscale.max"},
		{"too many", "web", &structs.Autoscale{Min: 1, Max: structs.MaxReplicas + 1, Metric: "inflight", Target: 1}, "autoscale.max"},
		{"gpu without GPUs", "web", &structs.Autoscale{Min: 1, Max: 2, Metric: "gpu", Target: 80}, "the gpu metric needs replicas with gpus"},
		{"bad gauge", "web", &structs.Autoscale{Min: 1, Max: 2, Metric: "gauge:9x", Target: 1}, "autoscale.metric"},
		{"other metric", "web", &structs.Autoscale{Min: 1, Max: 2, Metric: "cpu", Target: 1}, "autoscale.metric"},
		{"zero target", "web", &structs.Autoscale{Min: 1, Max: 2, Metric: "inflight"}, "autoscale.target"},
		{"tolerance", "web", &structs.Autoscale{Min: 1, Max: 2, Metric: "inflight", Target: 1, Tolerance: 1}, "autoscale.tolerance"},
		{"window", "web", &structs.Autoscale{Min: 1, Max: 2, Metric: "inflight", Target: 1, UpWindow: structs.MaxAutoscaleWindow + 1}, "autoscale.up_window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err, _ := h.autoscale(c.svc, c.a).(error)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
		})
	}
}

// The gpu metric needs replicas that hold GPUs, set on a service or kept
// through an update of its spec.
func TestFSM_ServiceAutoscale_GPUTargetNeedsGPUs(t *testing.T) {
	h := newHarness(t)
	h.registerService(service("web", 1, 2))
	gpu := &structs.Autoscale{Min: 1, Max: 4, Metric: structs.AutoscaleGPU, Target: 80}
	if got, ok := h.autoscale("web", gpu).(*structs.Service); !ok || got.Autoscale == nil || got.Autoscale.Metric != structs.AutoscaleGPU {
		t.Fatalf("autoscale on GPU utilisation of a service with GPUs: %v", got)
	}
	spec := service("web", 1, 0).Spec
	err, _ := h.apply(structs.ServiceUpdateType, structs.ServiceUpdateRequest{Name: "web", Spec: spec, MaxSurge: 1, At: h.at()}).(error)
	if err == nil || !strings.Contains(err.Error(), "service update: autoscale.metric: gpu: the replicas hold no GPUs") {
		t.Fatalf("update to no GPUs under a gpu target: err = %v", err)
	}
	if got := h.svc("web"); got.Spec.Job.GPUs != 2 || got.Version != 1 {
		t.Fatalf("refused update changed the service: %d GPUs, version %d", got.Spec.Job.GPUs, got.Version)
	}
}
