package structs

import (
	"errors"
	"strings"
)

// Normalize fills the defaults a service's spec may leave out: those of
// its job (JobSpec.Normalize: a replica runs on one node) and the port's
// env var (DefaultPortEnv).
func (s *ServiceSpec) Normalize() {
	s.Job.Normalize()
	if s.PortEnv == "" {
		s.PortEnv = DefaultPortEnv
	}
}

// Validate checks a service whose spec is normalized: its name, the
// replicas it wants, its reason, its autoscale (normalized here) and its
// spec. The error is a *FieldError
// naming the first wrong field.
func (s *Service) Validate() error {
	if err := ValidateServiceName(s.Name); err != nil {
		return err
	}
	if err := validateReplicas(s.Replicas); err != nil {
		return err
	}
	if err := validateServiceReason(s.Reason); err != nil {
		return err
	}
	if s.Autoscale != nil {
		s.Autoscale.Normalize()
		if err := s.Autoscale.Validate(); err != nil {
			return err
		}
		if err := s.Autoscale.ValidateFor(&s.Spec); err != nil {
			return err
		}
	}
	return s.Spec.Validate()
}

// Validate checks a scale: the service's name, the replicas it is to
// want and the reason.
func (r *ServiceScaleRequest) Validate() error {
	if err := ValidateServiceName(r.Name); err != nil {
		return err
	}
	if err := validateReplicas(r.Replicas); err != nil {
		return err
	}
	return validateServiceReason(r.Reason)
}

// Validate checks a delete: the service's name and the reason.
func (r *ServiceDeleteRequest) Validate() error {
	if err := ValidateServiceName(r.Name); err != nil {
		return err
	}
	return validateServiceReason(r.Reason)
}

// Validate checks a normalized service spec: the replicas' job (whose
// fields the error names as job.FIELD), the port's env var, the health
// check, the drain timeout and delay, and the rollout's progress
// deadline and unhealthy timeout. The error is a *FieldError naming the
// first wrong field.
func (s *ServiceSpec) Validate() error {
	if err := s.validateJob(); err != nil {
		return err
	}
	switch {
	case len(s.PortEnv) > MaxPortEnvLen || !ValidEnvName(s.PortEnv):
		return fieldErr("port_env", "%q: want 1 to %d letters, digits and '_', not starting with a digit", s.PortEnv, MaxPortEnvLen)
	case ReservedEnv(s.PortEnv):
		return fieldErr("port_env", "%s is set by skein for every job: choose another name", s.PortEnv)
	}
	if _, ok := s.Job.Env[s.PortEnv]; ok {
		return fieldErr("job.env", "%s is the replica's port (port_env), which skein sets", s.PortEnv)
	}
	if _, ok := s.Job.SecretEnv[s.PortEnv]; ok {
		return fieldErr("job.secret_env", "%s is the replica's port (port_env), which skein sets", s.PortEnv)
	}
	if s.Health != nil {
		if err := s.Health.Validate(); err != nil {
			return err
		}
	}
	switch {
	case s.DrainTimeout < 0 || s.DrainTimeout > MaxDrainTimeout:
		return fieldErr("drain_timeout", "%s is out of range 0s..%s", s.DrainTimeout, MaxDrainTimeout)
	case s.ProgressDeadline < 0 || s.ProgressDeadline > MaxProgressDeadline:
		return fieldErr("progress_deadline", "%s is out of range 0s..%s (0: the default, %s)", s.ProgressDeadline, MaxProgressDeadline, DefaultProgressDeadline)
	case s.UnhealthyTimeout < 0 || s.UnhealthyTimeout > MaxUnhealthyTimeout:
		return fieldErr("unhealthy_timeout", "%s is out of range 0s..%s (0: the default, %s)", s.UnhealthyTimeout, MaxUnhealthyTimeout, DefaultUnhealthyTimeout)
	}
	if s.DrainDelay < 0 || s.DrainDelay > MaxDrainDelay {
		return fieldErr("drain_delay", "%s is out of range 0s..%s", s.DrainDelay, MaxDrainDelay)
	}
	return nil
}

// validateJob checks the replicas' job as JobSpec.Validate does, and that
// it is a job a replica can be: one node, no array, no dependencies, no
// restart count.
func (s *ServiceSpec) validateJob() error {
	j := &s.Job
	if err := j.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return fieldErr("job."+fe.Field, "%s", fe.Msg)
		}
		return err
	}
	switch {
	case j.Nodes != 1:
		return fieldErr("job.nodes", "%d: a replica runs on one node (run more replicas instead)", j.Nodes)
	case j.Array != nil:
		return fieldErr("job.array", "set: a service runs replicas, not array tasks")
	case len(j.After) > 0:
		return fieldErr("job.after", "%d dependencies: a replica waits for no job", len(j.After))
	case j.Singleton:
		return fieldErr("job.singleton", "set: a replica waits for no job")
	case j.Restarts != 0:
		return fieldErr("job.restarts", "%d: a replica restarts for as long as its service wants it, so it takes no restart count", j.Restarts)
	}
	return nil
}

// Validate checks a health check: a known kind with what that kind takes
// (an HTTP path, an exec command, nothing for tcp), and its timings and
// failure count within bounds. Zero timings and failures take the
// defaults.
func (h *HealthCheck) Validate() error {
	switch h.Kind {
	case HealthHTTP:
		if err := validateHealthPath(h.Path); err != nil {
			return err
		}
		if len(h.Command) > 0 {
			return fieldErr("health.command", "set for an http check: only an exec check runs a command")
		}
	case HealthTCP:
		if h.Path != "" {
			return fieldErr("health.path", "set for a tcp check, which only connects to the port")
		}
		if len(h.Command) > 0 {
			return fieldErr("health.command", "set for a tcp check, which only connects to the port")
		}
	case HealthExec:
		if len(h.Command) == 0 || h.Command[0] == "" {
			return fieldErr("health.command", "empty: an exec check needs the program to run and its arguments")
		}
		if err := validateCommand("health.command", h.Command); err != nil {
			return err
		}
		if h.Path != "" {
			return fieldErr("health.path", "set for an exec check: only an http check takes a path")
		}
	default:
		return fieldErr("health.kind", "%q: want %s, %s or %s", h.Kind, HealthHTTP, HealthTCP, HealthExec)
	}
	switch {
	case h.Interval < 0 || h.Interval > MaxHealthInterval:
		return fieldErr("health.interval", "%s is out of range 0s..%s", h.Interval, MaxHealthInterval)
	case h.Timeout < 0 || h.Timeout > MaxHealthInterval:
		return fieldErr("health.timeout", "%s is out of range 0s..%s", h.Timeout, MaxHealthInterval)
	case h.Interval > 0 && h.Timeout > h.Interval:
		return fieldErr("health.timeout", "%s is longer than the interval %s", h.Timeout, h.Interval)
	case h.Grace < 0 || h.Grace > MaxHealthGrace:
		return fieldErr("health.grace", "%s is out of range 0s..%s", h.Grace, MaxHealthGrace)
	case h.Failures < 0 || h.Failures > MaxHealthFailures:
		return fieldErr("health.failures", "%d is out of range 0..%d", h.Failures, MaxHealthFailures)
	}
	return nil
}

// validateHealthPath checks an http check's path: it starts with '/',
// fits MaxHealthPathLen and holds no space or control character (it is
// sent as it is in the request line).
func validateHealthPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fieldErr("health.path", "%q: want a path starting with '/', like /health", p)
	case len(p) > MaxHealthPathLen:
		return fieldErr("health.path", "%d bytes, more than the limit of %d", len(p), MaxHealthPathLen)
	}
	for i := range len(p) {
		if c := p[i]; c <= ' ' || c == 0x7f {
			return fieldErr("health.path", "%q holds a space or control character (escape it, like %%20)", p)
		}
	}
	return nil
}

// validateReplicas checks a count of replicas.
func validateReplicas(n int) error {
	if n < 0 || n > MaxReplicas {
		return fieldErr("replicas", "%d is out of range 0..%d", n, MaxReplicas)
	}
	return nil
}

// validateServiceReason checks the reason of a register, scale or delete.
func validateServiceReason(r string) error {
	if len(r) > MaxServiceReasonLen {
		return fieldErr("reason", "%d bytes, more than the limit of %d", len(r), MaxServiceReasonLen)
	}
	return nil
}
