package sched

import (
	"testing"
	"time"

	"github.com/skein-dev/skein/structs"
)

var asT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// autoscaled is a service of cur replicas scaled at scaledAt, 1-8 on
// inflight=10, up window 30s, down window 5m.
func autoscaled(cur int, scaledAt time.Time) *structs.Service {
	a := &structs.Autoscale{Min: 1, Max: 8, Metric: structs.AutoscaleInFlight, Target: 10,
		UpWindow: structs.Duration(30 * time.Second), DownWindow: structs.Duration(5 * time.Minute)}
	a.Normalize()
	return &structs.Service{Name: "web", Replicas: cur, ScaledAt: scaledAt, Autoscale: a}
}

// toZero is autoscaled with Min 0: scale to zero, no up window.
func toZero(cur int, scaledAt time.Time) *structs.Service {
	svc := autoscaled(cur, scaledAt)
	svc.Autoscale.Min, svc.Autoscale.UpWindow = 0, 0
	return svc
}

func TestAutoscale_Decisions(t *testing.T) {
	sec := func(n int) time.Time { return asT0.Add(time.Duration(n) * time.Second) }
	long := sec(-3600)
	cases := []struct {
		name     string
		svc      *structs.Service
		observed float64
		now      time.Time
		history  AutoscaleHistory
		want     int
		reason   string
		history2 AutoscaleHistory
	}{
		{name: "within tolerance", svc: autoscaled(2, long), observed: 10.9, now: sec(0), want: 2},
		{name: "above, first look, waits the up window", svc: autoscaled(2, long), observed: 38, now: sec(0),
			want: 2, history2: AutoscaleHistory{AboveSince: sec(0)}},
		{name: "above for the up window", svc: autoscaled(2, long), observed: 38, now: sec(30),
			history: AutoscaleHistory{AboveSince: sec(0)}, want: 8,
			reason: "scaled 2→8: 38 requests in flight per replica, target 10"},
		{name: "above, not long enough", svc: autoscaled(2, long), observed: 38, now: sec(29),
			history: AutoscaleHistory{AboveSince: sec(0)}, want: 2, history2: AutoscaleHistory{AboveSince: sec(0)}},
		{name: "ceil of the ratio", svc: autoscaled(2, long), observed: 15, now: sec(30),
			history: AutoscaleHistory{AboveSince: sec(0)}, want: 3,
			reason: "scaled 2→3: 15 requests in flight per replica, target 10"},
		{name: "at max stays", svc: autoscaled(8, long), observed: 50, now: sec(30),
			history: AutoscaleHistory{AboveSince: sec(0)}, want: 8},
		{name: "below, first look, waits the down window", svc: autoscaled(4, long), observed: 1, now: sec(0),
			want: 4, history2: AutoscaleHistory{BelowSince: sec(0)}},
		{name: "below for the down window", svc: autoscaled(4, long), observed: 1, now: sec(300),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 1,
			reason: "scaled 4→1: 1 requests in flight per replica, target 10"},
		{name: "step down then up again resets the wait", svc: autoscaled(4, long), observed: 20, now: sec(200),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 4, history2: AutoscaleHistory{AboveSince: sec(200)}},
		{name: "back within tolerance forgets", svc: autoscaled(4, long), observed: 10, now: sec(200),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 4},
		{name: "no scale down within the down window of the last scale", svc: autoscaled(4, sec(100)), observed: 1, now: sec(350),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 4, history2: AutoscaleHistory{BelowSince: sec(0)}},
		{name: "new leader: no history, recent scale, no scale down", svc: autoscaled(4, sec(-10)), observed: 0, now: sec(0),
			want: 4, history2: AutoscaleHistory{BelowSince: sec(0)}},
		{name: "never below min", svc: autoscaled(2, long), observed: 0, now: sec(300),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 1,
			reason: "scaled 2→1: 0 requests in flight per replica, target 10"},
		{name: "outside the bounds is clamped at once", svc: autoscaled(12, long), observed: 10, now: sec(0),
			want: 8, reason: "scaled 12→8: autoscale is 1-8"},
		{name: "scaled to zero, nothing held, stays", svc: toZero(0, long), observed: 0, now: sec(0), want: 0},
		{name: "scaled to zero, a request held, one replica at once", svc: toZero(0, long), observed: 1, now: sec(0),
			want: 1, reason: "scaled 0→1: 1 requests held for a replica, target 10"},
		{name: "scaled to zero, many held, as many as they need", svc: toZero(0, long), observed: 35, now: sec(0),
			want: 4, reason: "scaled 0→4: 35 requests held for a replica, target 10"},
		{name: "idle for the down window, to zero", svc: toZero(1, long), observed: 0, now: sec(300),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 0,
			reason: "scaled 1→0: 0 requests in flight per replica, target 10"},
		{name: "idle, not yet for the down window", svc: toZero(1, long), observed: 0, now: sec(299),
			history: AutoscaleHistory{BelowSince: sec(0)}, want: 1, history2: AutoscaleHistory{BelowSince: sec(0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Autoscale(AutoscaleLook{Service: c.svc, Observed: c.observed, Now: c.now, History: c.history})
			if d.Replicas != c.want || d.Reason != c.reason {
				t.Fatalf("got %d %q, want %d %q", d.Replicas, d.Reason, c.want, c.reason)
			}
			if c.reason == "" && d.History != c.history2 {
				t.Fatalf("history = %+v, want %+v", d.History, c.history2)
			}
		})
	}
}

func TestAutoscale_GaugeReason(t *testing.T) {
	svc := autoscaled(1, time.Time{})
	svc.Autoscale.Metric, svc.Autoscale.UpWindow = "gauge:vllm:num_requests_waiting", 0
	d := Autoscale(AutoscaleLook{Service: svc, Observed: 25.5, Now: asT0})
	if d.Replicas != 3 || d.Reason != "scaled 1→3: gauge vllm:num_requests_waiting 25.5 per replica, target 10" {
		t.Fatalf("got %d %q", d.Replicas, d.Reason)
	}
}

func TestAutoscale_GPUUtilisation(t *testing.T) {
	svc := autoscaled(2, time.Time{})
	svc.Autoscale.Metric, svc.Autoscale.Target, svc.Autoscale.UpWindow = structs.AutoscaleGPU, 80, 0
	for _, c := range []struct {
		observed float64
		want     int
		reason   string
	}{
		{observed: 100, want: 3, reason: "scaled 2→3: 100% GPU utilisation per replica, target 80"},
		{observed: 85, want: 2},
		{observed: 72.5, want: 2},
		{observed: 0, want: 1, reason: "scaled 2→1: 0% GPU utilisation per replica, target 80"},
	} {
		h := AutoscaleHistory{BelowSince: asT0.Add(-time.Hour)}
		d := Autoscale(AutoscaleLook{Service: svc, Observed: c.observed, Now: asT0, History: h})
		if d.Replicas != c.want || d.Reason != c.reason {
			t.Errorf("%v%%: got %d %q, want %d %q", c.observed, d.Replicas, d.Reason, c.want, c.reason)
		}
	}
}

// A load that steps up and stays, looked at every 5s, makes one scale
// up after the up window and then none: once scaled, the load per
// replica is within the tolerance. When it stops, one scale down after
// the down window, and no more.
func TestAutoscale_StepOfLoadScalesOnceEachWay(t *testing.T) {
	svc := autoscaled(1, time.Time{})
	var h AutoscaleHistory
	total := func(at int) float64 { // requests in flight, all replicas together
		if at >= 60 && at < 1200 {
			return 40
		}
		return 0
	}
	var scales []string
	for at := 0; at <= 3000; at += 5 {
		now := asT0.Add(time.Duration(at) * time.Second)
		d := Autoscale(AutoscaleLook{Service: svc, Observed: total(at) / float64(svc.Replicas), Now: now, History: h})
		h = d.History
		if d.Replicas != svc.Replicas {
			scales = append(scales, d.Reason)
			svc.Replicas, svc.ScaledAt = d.Replicas, now
		}
	}
	want := []string{
		"scaled 1→4: 40 requests in flight per replica, target 10",
		"scaled 4→1: 0 requests in flight per replica, target 10",
	}
	if len(scales) != len(want) || scales[0] != want[0] || scales[1] != want[1] {
		t.Fatalf("scales = %q, want %q", scales, want)
	}
}

// While a rollout runs or rolls back the autoscaler decides nothing,
// says why, and drops its history; once the rollout is over the same
// look scales again, its up window starting afresh.
func TestAutoscale_PausesDuringARollout(t *testing.T) {
	above := AutoscaleHistory{AboveSince: asT0.Add(-time.Hour)}
	for _, state := range []string{structs.RolloutRunning, structs.RolloutRollingBack} {
		svc := autoscaled(2, asT0.Add(-time.Hour))
		svc.Rollout = &structs.Rollout{Version: 3, From: 2, State: state}
		d := Autoscale(AutoscaleLook{Service: svc, Observed: 38, Now: asT0, History: above})
		want := AutoscaleDecision{Replicas: 2, Paused: "paused: rollout to version 3 in progress"}
		if d != want {
			t.Errorf("%s: got %+v, want %+v", state, d, want)
		}
		// Out of bounds is left alone too: the rollout counts on Replicas.
		svc.Replicas = 9
		if d := Autoscale(AutoscaleLook{Service: svc, Observed: 38, Now: asT0}); d.Replicas != 9 || d.Paused == "" {
			t.Errorf("%s: out of bounds: got %+v, want 9 replicas, paused", state, d)
		}
	}
	for _, state := range []string{structs.RolloutDone, structs.RolloutRolledBack} {
		svc := autoscaled(2, asT0.Add(-time.Hour))
		svc.Rollout = &structs.Rollout{Version: 3, From: 2, State: state}
		d := Autoscale(AutoscaleLook{Service: svc, Observed: 38, Now: asT0, History: above})
		if d.Paused != "" || d.Replicas != 8 {
			t.Errorf("%s: got %+v, want a scale to 8", state, d)
		}
		d = Autoscale(AutoscaleLook{Service: svc, Observed: 38, Now: asT0})
		if d.Replicas != 2 || d.History.AboveSince != asT0 {
			t.Errorf("%s, no history: got %+v, want the up window to start now", state, d)
		}
	}
}
