package structs

import (
	"strings"
	"testing"
)

func TestServiceUpdateRequest_NormalizeGivesASurgeOfOneWhenNeitherLimitIsSet(t *testing.T) {
	r := ServiceUpdateRequest{Name: "web", Spec: ServiceSpec{Job: JobSpec{Command: []string{"serve"}}}}
	r.Normalize()
	if r.MaxSurge != 1 || r.MaxUnavailable != 0 || r.Spec.PortEnv != DefaultPortEnv || r.Spec.Job.Nodes != 1 {
		t.Fatalf("normalized %+v", r)
	}
	r = ServiceUpdateRequest{MaxUnavailable: 2}
	r.Normalize()
	if r.MaxSurge != 0 || r.MaxUnavailable != 2 {
		t.Fatalf("a limit given was changed: %+v", r)
	}
}

func TestServiceUpdateRequest_ValidateNamesTheField(t *testing.T) {
	ok := func() ServiceUpdateRequest {
		r := ServiceUpdateRequest{Name: "web", Spec: ServiceSpec{Job: JobSpec{Command: []string{"serve"}}}, MaxSurge: 1}
		r.Spec.Normalize()
		return r
	}
	if r := ok(); r.Validate() != nil {
		t.Fatal(r.Validate())
	}
	for _, c := range []struct {
		name string
		edit func(*ServiceUpdateRequest)
		want string
	}{
		{"bad name", func(r *ServiceUpdateRequest) { r.Name = "Web" }, "name:"},
		{"negative surge", func(r *ServiceUpdateRequest) { r.MaxSurge = -1 }, "max_surge: -1 is out of range 0..1000"},
		{"huge unavailable", func(r *ServiceUpdateRequest) { r.MaxUnavailable = 1001 }, "max_unavailable: 1001 is out of range 0..1000"},
		{"no room to move", func(r *ServiceUpdateRequest) { r.MaxSurge = 0 }, "max_surge: 0 with max_unavailable 0"},
		{"long reason", func(r *ServiceUpdateRequest) { r.Reason = strings.Repeat("x", MaxServiceReasonLen+1) }, "reason:"},
		{"bad spec", func(r *ServiceUpdateRequest) { r.Spec.Job.Nodes = 2 }, "job.nodes: 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ok()
			c.edit(&r)
			if err := r.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestServiceRolloutRequest_ValidateRefusesStepsThatMeanNothingOrTwoThings(t *testing.T) {
	for _, c := range []struct {
		name string
		req  ServiceRolloutRequest
		want string // "" valid
	}{
		{"add", ServiceRolloutRequest{Name: "web", Version: 2, Add: 1}, ""},
		{"stop", ServiceRolloutRequest{Name: "web", Version: 2, Stop: []string{"x-r0"}}, ""},
		{"roll back", ServiceRolloutRequest{Name: "web", Version: 2, RollBack: true, Reason: "why"}, ""},
		{"done", ServiceRolloutRequest{Name: "web", Version: 2, Done: true}, ""},
		{"nothing", ServiceRolloutRequest{Name: "web", Version: 2}, "add: 0 with nothing to stop"},
		{"no version", ServiceRolloutRequest{Name: "web", Add: 1}, "version: 0: want 1 or more"},
		{"negative add", ServiceRolloutRequest{Name: "web", Version: 2, Add: -1}, "add: -1 is out of range"},
		{"both", ServiceRolloutRequest{Name: "web", Version: 2, RollBack: true, Done: true}, "roll_back: set with done"},
		{"done and add", ServiceRolloutRequest{Name: "web", Version: 2, Done: true, Add: 1}, "makes and stops no replica"},
		{"too many stops", ServiceRolloutRequest{Name: "web", Version: 2, Stop: make([]string, MaxReplicas+1)}, "stop: 1001 replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.req.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
