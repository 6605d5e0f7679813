package structs

import (
	"strconv"
	"strings"
	"time"
)

// A Service is a long-running job of Replicas copies. Each copy, a
// replica, is a job of its own (Job.Service names the service): placed
// like a one-node job, restarted whenever it ends for as long as the
// service wants it, and replaced elsewhere when its node is lost. The
// service is reached through the ingress of any node, which sends each
// request to a healthy replica (HealthCheck) on the port its allocation
// was given (Allocation.MasterPort, in the env var PortEnv names).
type Service struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Owner and AllowRoot are stamped by the leader as for a job, and
	// every replica job inherits them.
	Owner     string      `json:"owner,omitempty"`
	AllowRoot bool        `json:"allow_root,omitempty"`
	Spec      ServiceSpec `json:"spec"`
	// Replicas is how many replicas the service wants now; a scale
	// changes it, with Reason saying why ("scaled 2→4 by alice").
	Replicas int    `json:"replicas"`
	Reason   string `json:"reason,omitempty"`
	// NextReplica numbers the next replica job made (its ID is the
	// service's ID, '-', that number), so that a replica made again after
	// a scale down never takes an ID the state still holds.
	NextReplica int `json:"next_replica"`
	// Autoscale, when set, lets the leader set Replicas between its Min
	// and Max from a metric of the replicas' load; ScaledAt is when
	// Replicas last changed, whoever changed it.
	Autoscale *Autoscale `json:"autoscale,omitempty"`
	ScaledAt  time.Time  `json:"scaled_at,omitzero"`
	// Version numbers the service's spec: 1 at register, one more at each
	// update. A replica job runs the version it was made from
	// (Job.ServiceVersion); Rollout, while set, is an update replacing
	// the replicas of an older version.
	Version int      `json:"version"`
	Rollout *Rollout `json:"rollout,omitempty"`
	// PrevSpec is the spec of Rollout.From while a rollout that may still
	// roll back runs: a rollback makes it the spec again.
	PrevSpec *ServiceSpec `json:"prev_spec,omitempty"`
	// Deleted is set by a delete: every replica stops, and the service
	// goes once none runs.
	Deleted     bool      `json:"deleted,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	CreateIndex uint64    `json:"create_index"`
	ModifyIndex uint64    `json:"modify_index"`
}

// Autoscale is how the leader scales a service: between Min and Max
// replicas, so that Metric per replica stays near Target. Desired =
// ceil(current × observed / Target), left alone within Tolerance of the
// target; a scale up waits UpWindow of load above it, a scale down
// DownWindow below it (stabilisation: up fast, down slowly).
type Autoscale struct {
	Min int `json:"min"`
	Max int `json:"max"`
	// Metric is AutoscaleInFlight, AutoscaleGPU or AutoscaleGaugePrefix
	// followed by a Prometheus gauge's name, read from each replica's
	// /metrics.
	Metric     string   `json:"metric"`
	Target     float64  `json:"target"`
	Tolerance  float64  `json:"tolerance,omitempty"`
	UpWindow   Duration `json:"up_window,omitempty"`
	DownWindow Duration `json:"down_window,omitempty"`
}

// Autoscale metrics.
const (
	// AutoscaleInFlight: requests in flight or queued per replica, as the
	// ingress of every node counts them.
	AutoscaleInFlight = "inflight"
	// AutoscaleGPU: the mean utilisation (percent) of the replicas' GPUs.
	AutoscaleGPU = "gpu"
	// AutoscaleGaugePrefix, followed by a gauge's name: its mean value
	// over the replicas' /metrics ("gauge:vllm:num_requests_waiting").
	AutoscaleGaugePrefix = "gauge:"
)

// Rollout is an update of a service in progress: replicas of the older
// versions are replaced by replicas of Version a few at a time, each new
// one healthy before the next old one drains.
type Rollout struct {
	// Version is the version being rolled out; From the one it replaces
	// (the one a rollback returns to).
	Version int `json:"version"`
	From    int `json:"from"`
	// MaxSurge is how many replicas beyond Replicas may run during the
	// rollout, MaxUnavailable how many fewer than Replicas may be healthy.
	MaxSurge       int `json:"max_surge"`
	MaxUnavailable int `json:"max_unavailable"`
	// State is RolloutRunning, then RolloutDone; or RolloutRollingBack
	// (Version is then From again, the failed version is From, and the
	// failed replicas are being replaced) and then RolloutRolledBack.
	// Reason says why it rolled back or how it ended.
	State     string    `json:"state"`
	Reason    string    `json:"reason,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// ProgressAt is when the latest step that made or stopped replicas
	// was applied (the leader's time in the step); zero before the first.
	// With StartedAt and the replicas' health it is what the progress
	// deadline (ServiceSpec.ProgressDeadline) counts from.
	ProgressAt time.Time `json:"progress_at,omitzero"`
}

// Rollout states.
const (
	RolloutRunning     = "running"
	RolloutDone        = "done"
	RolloutRollingBack = "rolling-back"
	RolloutRolledBack  = "rolled-back"
)

// Active reports whether the rollout still replaces replicas: it runs
// or rolls back.
func (r *Rollout) Active() bool {
	return r != nil && (r.State == RolloutRunning || r.State == RolloutRollingBack)
}

// ReplicaJobID is the ID of replica job n of the service with ID id.
func ReplicaJobID(serviceID string, n int) string {
	return serviceID + "-r" + strconv.Itoa(n)
}

// ReplicaService returns the ID of the service whose replica job jobID
// is (ReplicaJobID), and false for a job that is no replica.
func ReplicaService(jobID string) (string, bool) {
	i := strings.LastIndex(jobID, "-r")
	if i <= 0 || i+2 == len(jobID) {
		return "", false
	}
	for _, c := range jobID[i+2:] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return jobID[:i], true
}

// ServiceSpec is what each replica of a service runs and how it is
// reached.
type ServiceSpec struct {
	// Job is every replica's job: its command, image, GPUs, priority and
	// the rest. It runs on one node; it has no array, dependencies or
	// restart count (a replica restarts for as long as it is wanted).
	Job JobSpec `json:"job"`
	// PortEnv names the env var that holds the replica's port
	// (DefaultPortEnv when ""); the replica must listen on it.
	PortEnv string `json:"port_env,omitempty"`
	// Health, when set, is how a replica's node tells a healthy replica;
	// without it a running replica is healthy.
	Health *HealthCheck `json:"health,omitempty"`
	// DrainTimeout is how long a replica being stopped keeps serving the
	// requests it has (DefaultDrainTimeout when 0).
	DrainTimeout Duration `json:"drain_timeout,omitempty"`
	// DrainDelay is how long a replica being stopped is left out of the
	// endpoints before it is signalled, for every node's ingress to have
	// heard of the stop (DefaultDrainDelay when 0).
	DrainDelay Duration `json:"drain_delay,omitempty"`
	// Public lets the ingress serve the service without a token when the
	// cluster's ACLs are on.
	Public bool `json:"public,omitempty"`
	// ProgressDeadline is how long a rollout to this spec may go without
	// progress (a step that makes or stops a replica, a new replica
	// running past its health grace or becoming healthy) before it rolls
	// back, as one whose new version cannot be placed would otherwise
	// wait forever (DefaultProgressDeadline when 0).
	ProgressDeadline Duration `json:"progress_deadline,omitempty"`
	// UnhealthyTimeout is how long a replica of this spec, being rolled
	// out, may stay unhealthy after its health grace before the rollout
	// rolls back (DefaultUnhealthyTimeout when 0).
	UnhealthyTimeout Duration `json:"unhealthy_timeout,omitempty"`
}

// RolloutProgressDeadline is the spec's ProgressDeadline, or its default.
func (s *ServiceSpec) RolloutProgressDeadline() time.Duration {
	if s.ProgressDeadline > 0 {
		return time.Duration(s.ProgressDeadline)
	}
	return time.Duration(DefaultProgressDeadline)
}

// RolloutUnhealthyTimeout is the spec's UnhealthyTimeout, or its default.
func (s *ServiceSpec) RolloutUnhealthyTimeout() time.Duration {
	if s.UnhealthyTimeout > 0 {
		return time.Duration(s.UnhealthyTimeout)
	}
	return time.Duration(DefaultUnhealthyTimeout)
}

// Service defaults.
const (
	DefaultPortEnv      = "PORT"
	DefaultDrainTimeout = Duration(30 * time.Second)
	DefaultDrainDelay   = Duration(2 * time.Second)
	// DefaultProgressDeadline and DefaultUnhealthyTimeout bound a
	// rollout (ServiceSpec.ProgressDeadline, UnhealthyTimeout); their
	// Max* bound what a spec may set.
	DefaultProgressDeadline = Duration(10 * time.Minute)
	DefaultUnhealthyTimeout = Duration(30 * time.Second)
	MaxProgressDeadline     = Duration(48 * time.Hour)
	MaxUnhealthyTimeout     = Duration(24 * time.Hour)
	// MaxReplicas bounds a service's replicas.
	MaxReplicas = 1000
	// MaxServiceNameLen bounds a service's name, which is a path segment
	// of the ingress and a DNS label.
	MaxServiceNameLen = 63
	// MaxPortEnvLen bounds ServiceSpec.PortEnv, MaxDrainTimeout its
	// DrainTimeout and MaxDrainDelay its DrainDelay.
	MaxPortEnvLen   = 64
	MaxDrainTimeout = Duration(time.Hour)
	MaxDrainDelay   = Duration(10 * time.Minute)
	// MaxServiceReasonLen bounds the reason of a register, scale or
	// delete.
	MaxServiceReasonLen = 512
)

// Health check kinds.
const (
	HealthHTTP = "http" // GET Path on the replica's port answers 2xx or 3xx
	HealthTCP  = "tcp"  // the replica's port accepts a connection
	HealthExec = "exec" // Command, run on the replica's node, exits 0
)

// HealthCheck is how a replica's node tells whether it serves.
type HealthCheck struct {
	Kind    string   `json:"kind"`
	Path    string   `json:"path,omitempty"`
	Command []string `json:"command,omitempty"`
	// Interval between checks, Timeout of each, and Failures in a row
	// that make a healthy replica unhealthy (one success makes it
	// healthy again); Grace is how long after its start a replica's
	// failures do not count (model loading). Zero values take the
	// defaults below.
	Interval Duration `json:"interval,omitempty"`
	Timeout  Duration `json:"timeout,omitempty"`
	Failures int      `json:"failures,omitempty"`
	Grace    Duration `json:"grace,omitempty"`
}

// Health check defaults.
const (
	DefaultHealthInterval = Duration(5 * time.Second)
	DefaultHealthTimeout  = Duration(2 * time.Second)
	DefaultHealthFailures = 3
)

// Bounds of a health check: its HTTP path, Interval and Timeout,
// Grace (model loading may take long, but not for days) and Failures.
const (
	MaxHealthPathLen  = 1024
	MaxHealthInterval = Duration(time.Hour)
	MaxHealthGrace    = Duration(24 * time.Hour)
	MaxHealthFailures = 100
)

// AllocHealth is what a replica's node last found of its health.
type AllocHealth struct {
	Healthy bool `json:"healthy"`
	// Starting, on a replica not healthy yet, says it has not passed its
	// first check and has not failed enough to be unhealthy: within its
	// grace, or below its failure threshold.
	Starting bool `json:"starting,omitempty"`
	// Reason says why it is not healthy ("GET /health: 503", "starting:
	// within its grace"), or what passed; the state keeps at most
	// MaxAllocHealthReasonLen bytes of it.
	Reason string `json:"reason,omitempty"`
	// At is when the node found it so; the state keeps the report that
	// changed Healthy or Reason, so it is when the replica became so.
	At time.Time `json:"at"`
}

// MaxAllocHealthReasonLen bounds AllocHealth.Reason as the state keeps it.
const MaxAllocHealthReasonLen = 256

// ValidateServiceName checks a service's name: 1 to MaxServiceNameLen
// lower-case letters, digits and '-', starting with a letter.
func ValidateServiceName(name string) error {
	if name == "" || len(name) > MaxServiceNameLen {
		return fieldErr("name", "%q: want 1 to %d characters", name, MaxServiceNameLen)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '-')
		if !ok {
			return fieldErr("name", "%q: want lower-case letters, digits and '-', starting with a letter", name)
		}
	}
	return nil
}

// String writes the check as --health takes it: "http:/health", "tcp",
// "exec:CMD ARGS".
func (h *HealthCheck) String() string {
	switch h.Kind {
	case HealthHTTP:
		return h.Kind + ":" + h.Path
	case HealthExec:
		return h.Kind + ":" + strings.Join(h.Command, " ")
	}
	return h.Kind
}
