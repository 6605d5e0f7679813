package structs

// Rollout defaults: a surge of one replica and none unavailable, when an
// update gives neither.
const (
	DefaultMaxSurge       = 1
	DefaultMaxUnavailable = 0
)

// Normalize fills an update's defaults: its spec's (ServiceSpec.Normalize)
// and, when it gives neither MaxSurge nor MaxUnavailable, a surge of
// DefaultMaxSurge.
func (r *ServiceUpdateRequest) Normalize() {
	r.Spec.Normalize()
	if r.MaxSurge == 0 && r.MaxUnavailable == 0 {
		r.MaxSurge, r.MaxUnavailable = DefaultMaxSurge, DefaultMaxUnavailable
	}
}

// Validate checks a normalized update: the service's name, the new spec
// (as a register's), MaxSurge and MaxUnavailable (0..MaxReplicas, not
// both 0: the rollout could not move) and the reason.
func (r *ServiceUpdateRequest) Validate() error {
	if err := ValidateServiceName(r.Name); err != nil {
		return err
	}
	switch {
	case r.MaxSurge < 0 || r.MaxSurge > MaxReplicas:
		return fieldErr("max_surge", "%d is out of range 0..%d", r.MaxSurge, MaxReplicas)
	case r.MaxUnavailable < 0 || r.MaxUnavailable > MaxReplicas:
		return fieldErr("max_unavailable", "%d is out of range 0..%d", r.MaxUnavailable, MaxReplicas)
	case r.MaxSurge == 0 && r.MaxUnavailable == 0:
		return fieldErr("max_surge", "0 with max_unavailable 0: no replica could be replaced")
	}
	if err := validateServiceReason(r.Reason); err != nil {
		return err
	}
	return r.Spec.Validate()
}

// Validate checks a rollout step's shape: the service's name, a version,
// Add and Stop within MaxReplicas, and RollBack or Done alone.
func (r *ServiceRolloutRequest) Validate() error {
	if err := ValidateServiceName(r.Name); err != nil {
		return err
	}
	switch {
	case r.Version < 1:
		return fieldErr("version", "%d: want 1 or more", r.Version)
	case r.Add < 0 || r.Add > MaxReplicas:
		return fieldErr("add", "%d is out of range 0..%d", r.Add, MaxReplicas)
	case len(r.Stop) > MaxReplicas:
		return fieldErr("stop", "%d replicas, more than the limit of %d", len(r.Stop), MaxReplicas)
	case r.RollBack && r.Done:
		return fieldErr("roll_back", "set with done: a step does one or the other")
	case (r.RollBack || r.Done) && (r.Add > 0 || len(r.Stop) > 0):
		return fieldErr("add", "a step that rolls back or ends the rollout makes and stops no replica")
	case !r.RollBack && !r.Done && r.Add == 0 && len(r.Stop) == 0:
		return fieldErr("add", "0 with nothing to stop: the step does nothing")
	}
	return validateServiceReason(r.Reason)
}
