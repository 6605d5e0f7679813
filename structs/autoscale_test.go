package structs

import (
	"math"
	"strings"
	"testing"
)

func TestAutoscale_ParseTargetAndRange(t *testing.T) {
	cases := []struct {
		target, metric string
		value          float64
		err            string
	}{
		{"inflight=10", AutoscaleInFlight, 10, ""},
		{"waiting=2.5", AutoscaleInFlight, 2.5, ""},
		{"gpu=80", AutoscaleGPU, 80, ""},
		{"gauge:vllm:num_requests_waiting=5", "gauge:vllm:num_requests_waiting", 5, ""},
		{"inflight", "", 0, "want METRIC=VALUE"},
		{"inflight=NaN", "", 0, "is not a number"},
		{"inflight=1e400", "", 0, "is not a number"},
	}
	for _, c := range cases {
		var a Autoscale
		err := a.ParseTarget(c.target)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.target, err, c.err)
			}
			continue
		}
		if err != nil || a.Metric != c.metric || a.Target != c.value || a.TargetText() != c.metric+"="+strings.SplitN(c.target, "=", 2)[1] {
			t.Errorf("%q: %+v, %v", c.target, a, err)
		}
	}
	var a Autoscale
	if err := a.ParseRange("2-8"); err != nil || a.Min != 2 || a.Max != 8 {
		t.Errorf("2-8: %+v, %v", a, err)
	}
	for _, bad := range []string{"8", "a-b", "-", "1-2-3"} {
		if err := a.ParseRange(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestValidateLoads_BoundsAReport(t *testing.T) {
	ok := []ServiceLoad{
		{Service: "web", InFlight: 3, Gauges: map[string]float64{"a": -1}},
		{Service: "llm", GPUUtil: 6400, GPUs: MaxGPUsPerNode},
		{Service: "idle", GPUUtil: 0, GPUs: 2},
	}
	if err := ValidateLoads(ok); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]struct {
		loads []ServiceLoad
		says  string
	}{
		"bad name":          {[]ServiceLoad{{Service: "Web"}}, "name"},
		"negative":          {[]ServiceLoad{{Service: "web", InFlight: -1}}, "in_flight"},
		"not a number":      {[]ServiceLoad{{Service: "web", Gauges: map[string]float64{"a": math.NaN()}}}, "gauges"},
		"too many":          {make([]ServiceLoad, MaxLoadServices+1), "services"},
		"too many GPUs":     {[]ServiceLoad{{Service: "web", GPUs: MaxGPUsPerNode + 1}}, "gpus: 65: want 0 to 64"},
		"negative GPUs":     {[]ServiceLoad{{Service: "web", GPUs: -1}}, "gpus"},
		"over 100 % a GPU":  {[]ServiceLoad{{Service: "web", GPUUtil: 201, GPUs: 2}}, "gpu_util: 201 over 2 GPUs: want 0 to 200"},
		"util without GPUs": {[]ServiceLoad{{Service: "web", GPUUtil: 1}}, "gpu_util"},
		"negative util":     {[]ServiceLoad{{Service: "web", GPUUtil: -1, GPUs: 1}}, "gpu_util"},
		"util not a number": {[]ServiceLoad{{Service: "web", GPUUtil: math.NaN(), GPUs: 1}}, "gpu_util"},
	} {
		if err := ValidateLoads(bad.loads); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: err %v, want %q", name, err, bad.says)
		}
	}
}
