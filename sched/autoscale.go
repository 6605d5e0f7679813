package sched

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/skein-dev/skein/structs"
)

// AutoscaleHistory is what the leader remembers between autoscale looks
// at one service: since when the load has been above the target, or
// below it (zero: not so at the last look). It lives in the leader's
// memory only; a new leader starts from none and relies on
// Service.ScaledAt not to flap.
type AutoscaleHistory struct {
	AboveSince time.Time
	BelowSince time.Time
}

// AutoscaleLook is one look at an autoscaled service: its Replicas now,
// the metric per replica observed now (Observed: the mean over the
// replicas that report; for the gpu metric the mean utilisation of the
// GPUs the running replicas hold), and the history of earlier looks.
type AutoscaleLook struct {
	Service  *structs.Service
	Observed float64
	Now      time.Time
	History  AutoscaleHistory
}

// AutoscaleDecision is what a look decides: the replicas the service is
// to want (its Replicas when nothing changes), the reason in words when
// they change, and the history for the next look. Paused, when set, says
// why the autoscaler leaves the service alone for now whatever its load.
type AutoscaleDecision struct {
	Replicas int
	Reason   string
	Paused   string
	History  AutoscaleHistory
}

// Autoscale decides a service's replicas from one look. Desired =
// ceil(current × observed / target), within Min and Max; a load within
// the tolerance of the target changes nothing. A service scaled to zero
// (Min 0) observes the requests held for it, and wants ceil(held /
// target) replicas, at least one, as soon as any is held. A scale up waits until the
// load has been above the target for UpWindow, a scale down until it has
// been below for DownWindow and DownWindow has passed since the last
// scale (Service.ScaledAt, so that neither a step of load nor a new
// leader makes it flap).
//
// While a rollout runs or rolls back the autoscaler pauses: the replicas
// stay as they are (the rollout counts on them, and its surge skews the
// load per replica), and the history is dropped, so that the windows
// start again from the first look after the rollout.
func Autoscale(look AutoscaleLook) AutoscaleDecision {
	svc, a := look.Service, look.Service.Autoscale
	cur := svc.Replicas
	keep := AutoscaleDecision{Replicas: cur}
	if r := svc.Rollout; r.Active() {
		keep.Paused = fmt.Sprintf("paused: rollout to version %d in progress", r.Version)
		return keep
	}
	if cur < a.Min || cur > a.Max {
		n := a.Clamp(cur)
		return AutoscaleDecision{Replicas: n, Reason: fmt.Sprintf("scaled %d→%d: autoscale is %d-%d", cur, n, a.Min, a.Max)}
	}
	ratio := look.Observed / a.Target
	want := a.Clamp(int(math.Ceil(float64(cur) * ratio)))
	switch {
	case cur == 0 && look.Observed > 0:
		// Scaled to zero, Observed is every request the ingresses hold
		// for a replica: as many replicas as that load needs.
		want = a.Clamp(int(math.Ceil(ratio)))
	case math.Abs(ratio-1) <= a.Tolerance:
		return keep
	}
	h := look.History
	switch {
	case want > cur:
		if h.AboveSince.IsZero() {
			h.AboveSince = look.Now
		}
		keep.History = AutoscaleHistory{AboveSince: h.AboveSince}
		if look.Now.Sub(h.AboveSince) < time.Duration(a.UpWindow) {
			return keep
		}
	case want < cur:
		if h.BelowSince.IsZero() {
			h.BelowSince = look.Now
		}
		keep.History = AutoscaleHistory{BelowSince: h.BelowSince}
		down := time.Duration(a.DownWindow)
		if look.Now.Sub(h.BelowSince) < down || look.Now.Sub(svc.ScaledAt) < down {
			return keep
		}
	default:
		return keep
	}
	reason := fmt.Sprintf("scaled %d→%d: %s per replica, target %s", cur, want, metricText(a.Metric, look.Observed), number(a.Target))
	if cur == 0 {
		reason = fmt.Sprintf("scaled 0→%d: %s requests held for a replica, target %s", want, number(look.Observed), number(a.Target))
	}
	return AutoscaleDecision{Replicas: want, Reason: reason}
}

// metricText says a metric's value in words: "38 requests in flight",
// "85% GPU utilisation", "gauge vllm:num_requests_waiting 7.5".
func metricText(metric string, v float64) string {
	switch metric {
	case structs.AutoscaleInFlight:
		return number(v) + " requests in flight"
	case structs.AutoscaleGPU:
		return number(v) + "% GPU utilisation"
	}
	return "gauge " + metric[len(structs.AutoscaleGaugePrefix):] + " " + number(v)
}

// number writes v with at most two decimals.
func number(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
