package structs

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Autoscale defaults and bounds. A scale up happens once the load has
// been above the target for UpWindow (default 0: at the first look), a
// scale down once it has been below for DownWindow (default 5m) and
// DownWindow has passed since the last scale: up fast, down slowly.
const (
	DefaultAutoscaleTolerance  = 0.1
	DefaultAutoscaleUpWindow   = Duration(0)
	DefaultAutoscaleDownWindow = Duration(5 * time.Minute)
	MaxAutoscaleWindow         = Duration(24 * time.Hour)
	// MaxAutoscaleTarget bounds Target (a gauge may count bytes).
	MaxAutoscaleTarget = 1e15
	// AutoscaleWaiting is what --target takes as AutoscaleInFlight too:
	// the ingress counts a request queued at a replica as in flight.
	AutoscaleWaiting = "waiting"
)

// promMetricName is a Prometheus metric name.
var promMetricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// Gauge returns the gauge's name of a gauge metric, and false for another.
func (a *Autoscale) Gauge() (string, bool) {
	return strings.CutPrefix(a.Metric, AutoscaleGaugePrefix)
}

// Normalize fills what an autoscale leaves out: the tolerance and the
// down window (DefaultAutoscaleTolerance, DefaultAutoscaleDownWindow).
func (a *Autoscale) Normalize() {
	if a.Tolerance == 0 {
		a.Tolerance = DefaultAutoscaleTolerance
	}
	if a.DownWindow == 0 {
		a.DownWindow = DefaultAutoscaleDownWindow
	}
}

// Validate checks a normalized autoscale: 0 <= Min <= Max <= MaxReplicas,
// with Max at least 1 and a Min of 0 (scale to zero, which must be asked
// for) only on the in-flight metric: only the ingress, holding requests
// for a replica, sees the demand for a service that has none. Then a
// metric skein can observe, a positive Target, a
// Tolerance below 1 and windows within MaxAutoscaleWindow. The error is
// a *FieldError naming the first wrong field.
func (a *Autoscale) Validate() error {
	switch {
	case a.Min < 0:
		return fieldErr("autoscale.min", "%d: want at least 0", a.Min)
	case a.Max < max(a.Min, 1) || a.Max > MaxReplicas:
		return fieldErr("autoscale.max", "%d: want %d to %d", a.Max, max(a.Min, 1), MaxReplicas)
	case a.Min == 0 && a.Metric != AutoscaleInFlight:
		return fieldErr("autoscale.min", "0 (scale to zero) needs the inflight metric: with no replica, only the ingress sees the demand")
	}
	if err := validateAutoscaleMetric(a.Metric); err != nil {
		return err
	}
	switch {
	case !(a.Target > 0) || a.Target > MaxAutoscaleTarget:
		return fieldErr("autoscale.target", "%v: want more than 0, at most %g", a.Target, MaxAutoscaleTarget)
	case !(a.Tolerance >= 0) || a.Tolerance >= 1:
		return fieldErr("autoscale.tolerance", "%v: want 0 to 1 (a fraction of the target)", a.Tolerance)
	case a.UpWindow < 0 || a.UpWindow > MaxAutoscaleWindow:
		return fieldErr("autoscale.up_window", "%s: want 0 to %s", a.UpWindow, MaxAutoscaleWindow)
	case a.DownWindow < 0 || a.DownWindow > MaxAutoscaleWindow:
		return fieldErr("autoscale.down_window", "%s: want 0 to %s", a.DownWindow, MaxAutoscaleWindow)
	}
	return nil
}

func validateAutoscaleMetric(m string) error {
	if m == AutoscaleInFlight {
		return nil
	}
	if m == AutoscaleGPU {
		return nil
	}
	name, ok := strings.CutPrefix(m, AutoscaleGaugePrefix)
	if !ok {
		return fieldErr("autoscale.metric", "%q: want inflight, gpu or gauge:NAME", m)
	}
	if len(name) > 256 || !promMetricName.MatchString(name) {
		return fieldErr("autoscale.metric", "%q: want a Prometheus metric name after gauge: (letters, digits, '_' and ':', at most 256)", name)
	}
	return nil
}

// ValidateFor checks that the autoscale can observe the replicas of
// spec: the gpu metric needs replicas that hold GPUs.
func (a *Autoscale) ValidateFor(spec *ServiceSpec) error {
	if a.Metric == AutoscaleGPU && spec.Job.GPUs == 0 {
		return fieldErr("autoscale.metric", "gpu: the replicas hold no GPUs (the gpu metric needs replicas with gpus)")
	}
	return nil
}

// ScalesToZero reports whether the service's autoscaler may take it to
// no replica (Autoscale.Min 0): the ingress then holds its requests
// until a replica answers, and counts them as its load.
func (s *Service) ScalesToZero() bool {
	return s.Autoscale != nil && s.Autoscale.Min == 0 && !s.Deleted
}

// Clamp returns n within [Min, Max].
func (a *Autoscale) Clamp(n int) int { return min(max(n, a.Min), a.Max) }

// TargetText writes the metric and target as --target takes them:
// "inflight=10".
func (a *Autoscale) TargetText() string {
	return a.Metric + "=" + strconv.FormatFloat(a.Target, 'g', -1, 64)
}

// ParseRange parses --autoscale MIN-MAX ("1-8") into a's Min
// and Max.
func (a *Autoscale) ParseRange(s string) error {
	lo, hi, ok := strings.Cut(s, "-")
	mn, err1 := strconv.Atoi(lo)
	mx, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil {
		return fieldErr("autoscale", "%q: want MIN-MAX replicas, like 1-8", s)
	}
	a.Min, a.Max = mn, mx
	return nil
}

// ParseTarget parses --target METRIC=VALUE into a's Metric and Target:
// inflight=10 (or waiting=10, the same metric), gpu=80 (the replicas'
// GPUs' mean utilisation, in percent), gauge:NAME=V.
func (a *Autoscale) ParseTarget(s string) error {
	i := strings.LastIndex(s, "=")
	if i < 0 {
		return fieldErr("target", "%q: want METRIC=VALUE, like inflight=10, gpu=80 or gauge:NAME=5", s)
	}
	metric, value := s[:i], s[i+1:]
	v, err := strconv.ParseFloat(value, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return fieldErr("target", "%q: the value %q is not a number", s, value)
	}
	if metric == AutoscaleWaiting {
		metric = AutoscaleInFlight
	}
	a.Metric, a.Target = metric, v
	return nil
}

// ServiceLoad is what one node saw of an autoscaled service's load at
// its last look: the requests its ingress has in flight to the service's
// replicas (on any node), each of the service's replicas on this node's
// gauge, by allocation ID, and the utilisation of the GPUs its running
// replicas on this node hold: GPUUtil percent summed over GPUs of them
// (a sum and a count, so that the leader averages over every node's).
type ServiceLoad struct {
	Service  string             `json:"service"`
	InFlight int64              `json:"in_flight,omitempty"`
	Gauges   map[string]float64 `json:"gauges,omitempty"`
	GPUUtil  float64            `json:"gpu_util,omitempty"`
	GPUs     int                `json:"gpus,omitempty"`
}

// AutoscaleObservation is the leader's latest look at an autoscaled
// service's load: the metric per replica, and when. Paused, when set,
// says why that look decided nothing ("paused: rollout to version 3 in
// progress").
type AutoscaleObservation struct {
	Value  float64   `json:"value"`
	At     time.Time `json:"at"`
	Paused string    `json:"paused,omitempty"`
}

// MaxLoadServices bounds the services of one node's load report.
const MaxLoadServices = 4096

// ValidateLoads checks a node's load report: at most MaxLoadServices
// services, each named, at most MaxReplicas gauges each, every value a
// finite number, at most MaxGPUsPerNode GPUs with a utilisation of 0 to
// 100 % each.
func ValidateLoads(loads []ServiceLoad) error {
	if len(loads) > MaxLoadServices {
		return fieldErr("services", "%d: want at most %d", len(loads), MaxLoadServices)
	}
	for _, l := range loads {
		if err := ValidateServiceName(l.Service); err != nil {
			return err
		}
		if l.InFlight < 0 {
			return fieldErr("in_flight", "%d: want 0 or more", l.InFlight)
		}
		if len(l.Gauges) > MaxReplicas {
			return fieldErr("gauges", "%d: want at most %d", len(l.Gauges), MaxReplicas)
		}
		for id, v := range l.Gauges {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fieldErr("gauges", "%s: %v is not a number", ShortID(id), v)
			}
		}
		if l.GPUs < 0 || l.GPUs > MaxGPUsPerNode {
			return fieldErr("gpus", "%d: want 0 to %d", l.GPUs, MaxGPUsPerNode)
		}
		if !(l.GPUUtil >= 0) || l.GPUUtil > 100*float64(l.GPUs) {
			return fieldErr("gpu_util", "%v over %d GPUs: want 0 to %d (percent summed over the GPUs)", l.GPUUtil, l.GPUs, 100*l.GPUs)
		}
	}
	return nil
}

// Validate checks an autoscale entry: the service's name and, when set,
// the autoscale (normalized first).
func (r *ServiceAutoscaleRequest) Validate() error {
	if err := ValidateServiceName(r.Name); err != nil {
		return err
	}
	if r.Autoscale == nil {
		return nil
	}
	r.Autoscale.Normalize()
	return r.Autoscale.Validate()
}
