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
	ok := []ServiceLoad{{Service: "web", InFlight: 3, Gauges: map[string]float64{"a": -1}}}
	if err := ValidateLoads(ok); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]ServiceLoad{
		"bad name":     {{Service: "Web"}},
		"negative":     {{Service: "web", InFlight: -1}},
		"not a number": {{Service: "web", Gauges: map[string]float64{"a": math.NaN()}}},
		"too many":     make([]ServiceLoad, MaxLoadServices+1),
	} {
		if err := ValidateLoads(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
