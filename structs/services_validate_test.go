package structs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validService() Service {
	return Service{
		ID:       "svc-1",
		Name:     "llama",
		Replicas: 2,
		Spec: ServiceSpec{
			Job:    JobSpec{Command: []string{"serve", "--port", "$PORT"}, GPUs: 1},
			Health: &HealthCheck{Kind: HealthHTTP, Path: "/health"},
		},
	}
}

// wantField fails unless err is a *FieldError naming field, or, for "",
// unless err is nil; the message must hold every part.
func wantField(t *testing.T, err error, field string, parts ...string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Fatalf("got %v, want no error", err)
		}
		return
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("got %v, want a *FieldError for %s", err, field)
	}
	if fe.Field != field {
		t.Fatalf("error %q names field %q, want %q", err, fe.Field, field)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

func TestService_Validate(t *testing.T) {
	sec := func(n int) Duration { return Duration(time.Duration(n) * time.Second) }
	cases := []struct {
		name   string
		mutate func(*Service)
		field  string // "" = valid
		says   string
	}{
		{"valid", func(*Service) {}, "", ""},
		{"no health check", func(s *Service) { s.Spec.Health = nil }, "", ""},
		{"zero replicas", func(s *Service) { s.Replicas = 0 }, "", ""},
		{"most replicas", func(s *Service) { s.Replicas = MaxReplicas }, "", ""},
		{"too many replicas", func(s *Service) { s.Replicas = MaxReplicas + 1 }, "replicas", "out of range 0..1000"},
		{"negative replicas", func(s *Service) { s.Replicas = -1 }, "replicas", "-1"},
		{"empty name", func(s *Service) { s.Name = "" }, "name", "1 to 63"},
		{"upper-case name", func(s *Service) { s.Name = "Llama" }, "name", "lower-case"},
		{"name starting with a digit", func(s *Service) { s.Name = "7b" }, "name", "starting with a letter"},
		{"long reason", func(s *Service) { s.Reason = strings.Repeat("r", MaxServiceReasonLen+1) }, "reason", "513 bytes"},
		{"job checked as a job", func(s *Service) { s.Spec.Job.GPUs = -1 }, "job.gpus", "out of range"},
		{"job without command", func(s *Service) { s.Spec.Job.Command = nil }, "job.command", "empty"},
		{"two nodes", func(s *Service) { s.Spec.Job.Nodes = 2 }, "job.nodes", "one node"},
		{"an array", func(s *Service) { s.Spec.Job.Array = &ArraySpec{End: 3} }, "job.array", "not array tasks"},
		{"dependencies", func(s *Service) {
			s.Spec.Job.After = []Dependency{{JobID: "x", Condition: AfterOK}}
		}, "job.after", "waits for no job"},
		{"singleton", func(s *Service) { s.Spec.Job.Name = "llama"; s.Spec.Job.Singleton = true }, "job.singleton", "waits for no job"},
		{"exclusive", func(s *Service) { s.Spec.Job.Exclusive = true }, "", ""},
		{"restarts", func(s *Service) { s.Spec.Job.Restarts = 3 }, "job.restarts", "for as long as its service wants it"},
		{"time limit", func(s *Service) { s.Spec.Job.TimeLimit = Duration(time.Hour) }, "", ""},
		{"preemptible", func(s *Service) { s.Spec.Job.Preemptible = true }, "", ""},
		{"own port env", func(s *Service) { s.Spec.PortEnv = "HTTP_PORT_2" }, "", ""},
		{"port env of 64", func(s *Service) { s.Spec.PortEnv = strings.Repeat("P", MaxPortEnvLen) }, "", ""},
		{"port env too long", func(s *Service) { s.Spec.PortEnv = strings.Repeat("P", MaxPortEnvLen+1) }, "port_env", "1 to 64"},
		{"port env with a dash", func(s *Service) { s.Spec.PortEnv = "MY-PORT" }, "port_env", `"MY-PORT"`},
		{"port env starting with a digit", func(s *Service) { s.Spec.PortEnv = "1PORT" }, "port_env", "not starting with a digit"},
		{"port env skein sets", func(s *Service) { s.Spec.PortEnv = "CUDA_VISIBLE_DEVICES" }, "port_env", "set by skein"},
		{"port env in env", func(s *Service) { s.Spec.Job.Env = map[string]string{"PORT": "8000"} }, "job.env", "PORT is the replica's port"},
		{"port env in secret env", func(s *Service) { s.Spec.Job.SecretEnv = map[string]string{"PORT": "8000"} }, "job.secret_env", "port_env"},
		{"drain timeout", func(s *Service) { s.Spec.DrainTimeout = MaxDrainTimeout }, "", ""},
		{"drain timeout too long", func(s *Service) { s.Spec.DrainTimeout = MaxDrainTimeout + 1 }, "drain_timeout", "0s..1h0m0s"},
		{"negative drain timeout", func(s *Service) { s.Spec.DrainTimeout = -1 }, "drain_timeout", "out of range"},
		{"progress deadline", func(s *Service) { s.Spec.ProgressDeadline = MaxProgressDeadline }, "", ""},
		{"progress deadline too long", func(s *Service) { s.Spec.ProgressDeadline = MaxProgressDeadline + 1 }, "progress_deadline", "0s..48h0m0s"},
		{"negative progress deadline", func(s *Service) { s.Spec.ProgressDeadline = -1 }, "progress_deadline", "out of range"},
		{"unhealthy timeout", func(s *Service) { s.Spec.UnhealthyTimeout = MaxUnhealthyTimeout }, "", ""},
		{"unhealthy timeout too long", func(s *Service) { s.Spec.UnhealthyTimeout = MaxUnhealthyTimeout + 1 }, "unhealthy_timeout", "0s..24h0m0s"},
		{"negative unhealthy timeout", func(s *Service) { s.Spec.UnhealthyTimeout = -1 }, "unhealthy_timeout", "the default, 30s"},
		{"gpu target with GPUs", func(s *Service) {
			s.Spec.Job.GPUs = 2
			s.Autoscale = &Autoscale{Min: 1, Max: 4, Metric: AutoscaleGPU, Target: 80}
		}, "", ""},
		{"gpu target without GPUs", func(s *Service) {
			s.Spec.Job.GPUs = 0
			s.Autoscale = &Autoscale{Min: 1, Max: 4, Metric: AutoscaleGPU, Target: 80}
		}, "autoscale.metric", "the gpu metric needs replicas with gpus"},
		{"unknown metric", func(s *Service) {
			s.Autoscale = &Autoscale{Min: 1, Max: 4, Metric: "cpu", Target: 80}
		}, "autoscale.metric", "want inflight, gpu or gauge:NAME"},
		{"drain delay", func(s *Service) { s.Spec.DrainDelay = MaxDrainDelay }, "", ""},
		{"drain delay too long", func(s *Service) { s.Spec.DrainDelay = MaxDrainDelay + 1 }, "drain_delay", "0s..10m0s"},
		{"negative drain delay", func(s *Service) { s.Spec.DrainDelay = -1 }, "drain_delay", "out of range"},

		{"tcp check", func(s *Service) { s.Spec.Health = &HealthCheck{Kind: HealthTCP} }, "", ""},
		{"exec check", func(s *Service) {
			s.Spec.Health = &HealthCheck{Kind: HealthExec, Command: []string{"curl", "-f", "localhost:8000"}}
		}, "", ""},
		{"unknown kind", func(s *Service) { s.Spec.Health.Kind = "grpc" }, "health.kind", "want http, tcp or exec"},
		{"no kind", func(s *Service) { s.Spec.Health.Kind = "" }, "health.kind", `""`},
		{"http without path", func(s *Service) { s.Spec.Health.Path = "" }, "health.path", "starting with '/'"},
		{"http relative path", func(s *Service) { s.Spec.Health.Path = "health" }, "health.path", "starting with '/'"},
		{"http path too long", func(s *Service) { s.Spec.Health.Path = "/" + strings.Repeat("h", MaxHealthPathLen) }, "health.path", "1025 bytes"},
		{"http path with a newline", func(s *Service) { s.Spec.Health.Path = "/health\r\nX: y" }, "health.path", "control character"},
		{"http path with a space", func(s *Service) { s.Spec.Health.Path = "/a b" }, "health.path", "space"},
		{"http path with a query", func(s *Service) { s.Spec.Health.Path = "/health?full=1" }, "", ""},
		{"http with a command", func(s *Service) { s.Spec.Health.Command = []string{"true"} }, "health.command", "only an exec check"},
		{"tcp with a path", func(s *Service) { s.Spec.Health = &HealthCheck{Kind: HealthTCP, Path: "/"} }, "health.path", "only connects"},
		{"tcp with a command", func(s *Service) {
			s.Spec.Health = &HealthCheck{Kind: HealthTCP, Command: []string{"true"}}
		}, "health.command", "only connects"},
		{"exec without command", func(s *Service) { s.Spec.Health = &HealthCheck{Kind: HealthExec} }, "health.command", "empty"},
		{"exec with empty program", func(s *Service) {
			s.Spec.Health = &HealthCheck{Kind: HealthExec, Command: []string{""}}
		}, "health.command", "empty"},
		{"exec with a NUL", func(s *Service) {
			s.Spec.Health = &HealthCheck{Kind: HealthExec, Command: []string{"a\x00b"}}
		}, "health.command", "NUL"},
		{"exec command too big", func(s *Service) {
			s.Spec.Health = &HealthCheck{Kind: HealthExec, Command: []string{strings.Repeat("x", MaxCommandBytes+1)}}
		}, "health.command", "more than the limit"},
		{"exec with a path", func(s *Service) {
			s.Spec.Health = &HealthCheck{Kind: HealthExec, Command: []string{"true"}, Path: "/x"}
		}, "health.path", "only an http check"},
		{"timings", func(s *Service) {
			h := s.Spec.Health
			h.Interval, h.Timeout, h.Grace, h.Failures = sec(10), sec(10), MaxHealthGrace, MaxHealthFailures
		}, "", ""},
		{"timeout without interval", func(s *Service) { s.Spec.Health.Timeout = sec(30) }, "", ""},
		{"negative interval", func(s *Service) { s.Spec.Health.Interval = -1 }, "health.interval", "out of range"},
		{"interval too long", func(s *Service) { s.Spec.Health.Interval = MaxHealthInterval + 1 }, "health.interval", "0s..1h0m0s"},
		{"negative timeout", func(s *Service) { s.Spec.Health.Timeout = -1 }, "health.timeout", "out of range"},
		{"timeout too long", func(s *Service) { s.Spec.Health.Timeout = MaxHealthInterval + 1 }, "health.timeout", "out of range"},
		{"timeout past interval", func(s *Service) {
			s.Spec.Health.Interval, s.Spec.Health.Timeout = sec(5), sec(6)
		}, "health.timeout", "6s is longer than the interval 5s"},
		{"negative grace", func(s *Service) { s.Spec.Health.Grace = -1 }, "health.grace", "out of range"},
		{"grace too long", func(s *Service) { s.Spec.Health.Grace = MaxHealthGrace + 1 }, "health.grace", "0s..24h0m0s"},
		{"negative failures", func(s *Service) { s.Spec.Health.Failures = -1 }, "health.failures", "out of range"},
		{"too many failures", func(s *Service) { s.Spec.Health.Failures = MaxHealthFailures + 1 }, "health.failures", "0..100"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := validService()
			c.mutate(&s)
			s.Spec.Normalize()
			wantField(t, s.Validate(), c.field, c.says)
		})
	}
}

func TestServiceSpec_NormalizeFillsThePortEnvAndOneNode(t *testing.T) {
	s := ServiceSpec{Job: JobSpec{Command: []string{"serve"}}}
	s.Normalize()
	if s.PortEnv != DefaultPortEnv || s.Job.Nodes != 1 {
		t.Fatalf("after Normalize: port env %q, nodes %d; want %q and 1", s.PortEnv, s.Job.Nodes, DefaultPortEnv)
	}
	s = ServiceSpec{Job: JobSpec{Command: []string{"serve"}, Nodes: 1}, PortEnv: "HTTP_PORT"}
	s.Normalize()
	if s.PortEnv != "HTTP_PORT" {
		t.Fatalf("Normalize replaced the port env HTTP_PORT with %q", s.PortEnv)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestServiceSpec_ValidateRefusesAnEmptyPortEnv(t *testing.T) {
	s := validService().Spec
	s.Job.Nodes = 1
	wantField(t, s.Validate(), "port_env", `""`)
}

func TestServiceRequests_Validate(t *testing.T) {
	long := strings.Repeat("r", MaxServiceReasonLen+1)
	cases := []struct {
		name  string
		err   error
		field string
	}{
		{"scale", (&ServiceScaleRequest{Name: "llama", Replicas: 4, Reason: "scaled 2→4 by alice"}).Validate(), ""},
		{"scale to zero", (&ServiceScaleRequest{Name: "llama"}).Validate(), ""},
		{"scale a bad name", (&ServiceScaleRequest{Name: "Llama", Replicas: 1}).Validate(), "name"},
		{"scale too far", (&ServiceScaleRequest{Name: "llama", Replicas: MaxReplicas + 1}).Validate(), "replicas"},
		{"scale below zero", (&ServiceScaleRequest{Name: "llama", Replicas: -1}).Validate(), "replicas"},
		{"scale with a long reason", (&ServiceScaleRequest{Name: "llama", Replicas: 1, Reason: long}).Validate(), "reason"},
		{"delete", (&ServiceDeleteRequest{Name: "llama", Reason: "done"}).Validate(), ""},
		{"delete a bad name", (&ServiceDeleteRequest{Name: "-x"}).Validate(), "name"},
		{"delete with a long reason", (&ServiceDeleteRequest{Name: "llama", Reason: long}).Validate(), "reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantField(t, c.err, c.field) })
	}
}
